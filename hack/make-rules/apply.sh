#!/usr/bin/env bash
# Applies patches/<component>/<line>/*.patch, in order, with `git am --3way` on top of
# base/<version> in the materialised tree (materialising it first if needed).
#
# Usage: apply.sh [component]   (default: kubernetes)
# A no-op when the tree already carries exactly the series in patches/.
# Refuses to throw away commits or edits in the tree that are not exported
# (FORCE=1 overrides). A patch that does not apply stops with its file name
# and the conflicting paths; the tree is left at base/<version> plus the
# patches before it.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

component::load "${1:-kubernetes}"
"${REPO_ROOT}/hack/make-rules/materialize.sh" "${COMPONENT_NAME}"

series="$(component::series_id)"
head="$(component::git rev-parse HEAD)"
if [[ -f "$(component::sync_file)" ]] && [[ "$(cat "$(component::sync_file)")" == "${head} ${series}" ]] &&
  [[ -z "$(component::git status --porcelain --untracked-files=no)" ]]; then
  log "${COMPONENT_TREE}: $(component::rel_patches) already applied"
  exit 0
fi
if [[ -z "${FORCE:-}" ]]; then
  component::check_no_local_work
fi

component::git am --abort >/dev/null 2>&1 || true
component::git checkout --quiet --force main
component::git reset --quiet --hard "${COMPONENT_BASE_TAG}"
component::git clean --quiet -fdx -e /_output

mapfile -t patches < <(component::series_files)
log "applying ${#patches[@]} patches from $(component::rel_patches) onto ${COMPONENT_BASE_TAG}"
for p in "${patches[@]}"; do
  if ! out="$(component::git am --3way --keep-cr --committer-date-is-author-date "${p}" 2>&1)"; then
    conflicts="$(component::git diff --name-only --diff-filter=U 2>/dev/null | sed 's/^/    /')"
    component::git am --abort >/dev/null 2>&1 || true
    printf '%s\n' "${out}" | sed 's/^/    /' >&2
    fatal "$(component::rel_patches)/$(component::patch_name "${p}") does not apply to ${COMPONENT_BASE_TAG}${conflicts:+; conflicting paths:
${conflicts}}"
  fi
done
component::record_sync
log "${COMPONENT_TREE}: at $(component::git rev-parse --short HEAD), ${#patches[@]} patches on ${COMPONENT_BASE_TAG}"
