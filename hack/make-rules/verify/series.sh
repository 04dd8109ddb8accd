#!/usr/bin/env bash
# Each component's patch series applies with `git am --3way` to a fresh
# worktree of its pristine base (not the working tree).
#
# Usage: verify/series.sh [component...]   (default: every component)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

mapfile -t components < <(component::named_or_all "$@")
rc=0
for c in "${components[@]}"; do
  component::load "${c}"
  component::is_materialised || "${REPO_ROOT}/hack/make-rules/materialize.sh" "${c}"
  wt="$(mktemp -d)"
  component::git worktree add --quiet --detach "${wt}/tree" "${COMPONENT_BASE_TAG}"
  n=0
  ok=1
  while read -r p; do
    [[ -n "${p}" ]] || continue
    if ! (COMPONENT_TREE="${wt}/tree" component::git am --quiet --3way --keep-cr "${p}"); then
      echo "$(component::rel_patches)/$(component::patch_name "${p}") does not apply to a fresh ${COMPONENT_BASE_TAG}" >&2
      rc=1 ok=0
      break
    fi
    n=$((n + 1))
  done < <(component::series_files)
  [[ "${ok}" -eq 0 ]] || log "  ${c}: ${n} patches apply to a fresh ${COMPONENT_BASE_TAG}"
  component::git worktree remove --force "${wt}/tree"
  rm -rf "${wt}"
done
exit "${rc}"
