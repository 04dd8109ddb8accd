#!/usr/bin/env bash
# Writes docs/upstream/<component>/<topic>/ (PULL_REQUEST.md and patches/),
# for every such folder of a component (build/<component>/), as `make
# upstream-pr` makes them from the current series: the committed examples of
# a topic handed to upstream. Other folders (docs/upstream/enhancements/: KEP
# updates, written by hand) are not touched.
# verify/upstream-examples.sh runs this on a copy and fails when it differs.
#
# Usage: update/upstream-examples.sh [ROOT]   (default: this repository)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"
# It writes files of the repository as a whole: the newest release line's
# (a line is named explicitly where one is meant), whatever LINE says.
unset LINE

root="${1:-${REPO_ROOT}}"
for d in "${REPO_ROOT}"/docs/upstream/*/*/; do
  [[ -d "${d}" ]] || continue
  topic="$(basename "${d}")"
  c="$(basename "$(dirname "${d}")")"
  [[ -f "${REPO_ROOT}/build/${c}/component.env" ]] || continue
  out="${root}/docs/upstream/${c}/${topic}"
  rm -rf "${out}"
  mkdir -p "${out}"
  UPSTREAM_PR_OUT="${out}" "${REPO_ROOT}/hack/make-rules/upstream-pr.sh" "${c}" "${topic}" >/dev/null
  log "docs/upstream/${c}/${topic}: written"
done
