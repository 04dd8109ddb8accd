#!/usr/bin/env bash
# docs/upstream/<component>/<topic>/ is what `make upstream-pr` makes of the
# current series (update/upstream-examples.sh, run on a copy), for every
# component's folder; docs/upstream/enhancements/ (KEP updates) is not made.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

if [[ ! -d "${REPO_ROOT}/docs/upstream" ]]; then
  log "verify upstream-examples: no docs/upstream"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
"${REPO_ROOT}/hack/make-rules/update/upstream-examples.sh" "${tmp}"
for d in "${REPO_ROOT}"/docs/upstream/*/; do
  c="$(basename "${d}")"
  [[ -f "${REPO_ROOT}/build/${c}/component.env" ]] || continue
  if ! diff -r "${REPO_ROOT}/docs/upstream/${c}" "${tmp}/docs/upstream/${c}" >&2; then
    echo "docs/upstream/${c} is stale: run hack/make-rules/update/upstream-examples.sh" >&2
    exit 1
  fi
done
log "verify upstream-examples: docs/upstream is what make upstream-pr writes"
