#!/usr/bin/env bash
# The go.mod/go.sum overlays that put a component on another's patched
# staging modules (STAGING_FROM) are what update/staging-replaces.sh writes
# (run on a copy of the repository; the checkout is never changed).
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
for c in "${components[@]}"; do paths+=("build/${c}/overlay/go.mod" "build/${c}/overlay/go.sum"); done
verify::compare "${root}" hack/make-rules/update/staging-replaces.sh "${paths[@]}"
log "verify staging-replaces: overlays of ${components[*]} up to date"
