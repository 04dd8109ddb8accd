#!/usr/bin/env bash
# The generated blocks of the docs are what update/docs.sh writes. Works on a
# copy: the checkout is never changed.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
cp "${REPO_ROOT}/README.md" "${tmp}/README.md"
"${REPO_ROOT}/hack/make-rules/update/docs.sh" "${tmp}"
if ! diff -u "${REPO_ROOT}/README.md" "${tmp}/README.md" >&2; then
  echo "README.md's generated blocks are stale: run hack/make-rules/update/docs.sh" >&2
  exit 1
fi
log "verify docs: generated blocks up to date"
