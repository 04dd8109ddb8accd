#!/usr/bin/env bash
# The go.mod/go.sum overlays that put a component on another's patched
# staging modules (STAGING_FROM) are what update/staging-replaces.sh writes
# (run on a copy of the repository; the checkout is never changed), on
# every release line of each (LINE=<line>: that one).
#
# Usage: verify/staging-replaces.sh [component...]   (default: every component that sets STAGING_FROM)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

components=()
for c in $(component::named_or_all "$@"); do
  [[ -z "$(component::setting "${c}" STAGING_FROM)" ]] || components+=("${c}")
done
[[ ${#components[@]} -gt 0 ]] || { log "verify staging-replaces: no component sets STAGING_FROM"; exit 0; }
root="$(verify::scratch_root)"
trap 'rm -rf "${root}"' EXIT
TARGET_ROOT="${root}" "${REPO_ROOT}/hack/make-rules/update/staging-replaces.sh" "${components[@]}"
paths=()
default_line="$(line::default)"
for c in "${components[@]}"; do
  for l in $(component::lines "${c}"); do
    [[ -z "${LINE:-}" || "${LINE}" == "${l}" ]] || continue
    if [[ "${l}" == "${default_line}" ]]; then
      paths+=("build/${c}/overlay/go.mod" "build/${c}/overlay/go.sum")
    else
      paths+=("patches/${c}/${l}/overlay/go.mod" "patches/${c}/${l}/overlay/go.sum")
    fi
  done
done
verify::compare "${root}" hack/make-rules/update/staging-replaces.sh "${paths[@]}"
log "verify staging-replaces: overlays of ${components[*]} up to date"
