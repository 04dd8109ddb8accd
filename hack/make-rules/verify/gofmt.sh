#!/usr/bin/env bash
# gofmt: the Go files each component's series touches, and this repository's.
#
# Usage: verify/gofmt.sh [component...]   (default: every component)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

mapfile -t components < <(component::named_or_all "$@")
files=()
for c in "${components[@]}"; do
  component::load "${c}"
  component::is_materialised || continue
  while read -r f; do
    files+=("${COMPONENT_TREE}/${f}")
  done < <(component::git diff --name-only --diff-filter=d "${COMPONENT_BASE_TAG}" -- '*.go')
done
if git -C "${REPO_ROOT}" rev-parse --git-dir >/dev/null 2>&1; then
  while read -r f; do
    files+=("${REPO_ROOT}/${f}")
  done < <(cd "${REPO_ROOT}" && git ls-files --cached --others --exclude-standard -- '*.go')
fi
[[ ${#files[@]} -gt 0 ]] || exit 0
# gofmt fails, printing nothing on stdout, on a file it cannot parse.
bad="$(gofmt -l "${files[@]}")" || fatal "gofmt could not parse some files (see above)"
if [[ -n "${bad}" ]]; then
  printf 'not gofmt-clean:\n%s\n' "${bad}" >&2
  exit 1
fi
log "verify gofmt: ${#files[@]} files clean"
