#!/usr/bin/env bash
# The generated blocks of the docs are what update/docs.sh writes, and
# docs/rebase-report.md (make rebase-report) was written for the current pins
# and patch series. Works on a copy: the checkout is never changed.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
mkdir "${tmp}/docs"
cp "${REPO_ROOT}/README.md" "${tmp}/README.md"
cp "${REPO_ROOT}/docs/gates.md" "${tmp}/docs/gates.md"
"${REPO_ROOT}/hack/make-rules/update/docs.sh" "${tmp}"
for f in README.md docs/gates.md; do
  if ! diff -u "${REPO_ROOT}/${f}" "${tmp}/${f}" >&2; then
    echo "${f}'s generated blocks are stale: run hack/make-rules/update/docs.sh" >&2
    exit 1
  fi
done
# docs/rebase-report.md was written for the current pins and series.
report="${REPO_ROOT}/docs/rebase-report.md"
want="$(while read -r line c; do
  LINE="${line}" component::load "${c}"
  printf -- '- pin: line %s: %s %s (series %s)\n' "${line}" "${c}" "${COMPONENT_VERSION}" "$(component::series_id | cut -c1-12)"
done < <(line::components))"
have="$(grep '^- pin: ' "${report}" 2>/dev/null || true)"
if [[ "${want}" != "${have}" ]]; then
  diff <(echo "${have}") <(echo "${want}") >&2 || true
  echo "docs/rebase-report.md was written for other pins or series: run make rebase-report" >&2
  exit 1
fi
log "verify docs: generated blocks and docs/rebase-report.md up to date"
