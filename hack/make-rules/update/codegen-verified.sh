#!/usr/bin/env bash
# Runs each component's generators on a release line's patched tree
# (hack/make-rules/verify-codegen.sh, every step) and, when they leave it
# unchanged, records the key of those inputs (the tree's sources, the codegen
# hook and scripts, the Go version) in patches/<component>/<line>/codegen.verified.
# make test then does not regenerate that line while its key stays the same
# (CODEGEN_TRUST_RECORDED=1 in verify-codegen.sh); `make verify` regenerates
# every line.
# A failing line records nothing and fails this script.
#
# Not part of update/all.sh: it runs the generators (minutes per line).
#
# Usage: update/codegen-verified.sh [component...]
#   LINE=<line>: that line only (default: every line)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

if [[ -n "${LINE:-}" ]]; then
  lines=("${LINE}")
else
  mapfile -t lines < <(line::all)
fi
rc=0
for line in "${lines[@]}"; do
  export LINE="${line}"
  mapfile -t components < <(component::named_or_all "$@" | while read -r c; do
    if component::has_line "${c}" && [[ -f "${REPO_ROOT}/build/${c}/codegen.sh" ]]; then echo "${c}"; fi
  done)
  for c in "${components[@]}"; do
    from="$(component::setting "${c}" STAGING_FROM)"
    [[ -z "${from}" ]] || "${REPO_ROOT}/hack/make-rules/apply.sh" "${from}" >/dev/null
    "${REPO_ROOT}/hack/make-rules/apply.sh" "${c}" >/dev/null
    if ! CODEGEN_TRUST_RECORDED=0 "${REPO_ROOT}/hack/make-rules/verify-codegen.sh" "${c}"; then
      log "update codegen-verified: ${c} line ${line}: its generators changed the tree (above); nothing recorded"
      rc=1
      continue
    fi
    component::load "${c}"
    key="$("${REPO_ROOT}/hack/make-rules/verify-codegen.sh" --key "${c}")"
    {
      echo "# The key of the inputs on which ${c}'s generators last ran clean on this"
      echo "# line (hack/make-rules/update/codegen-verified.sh wrote it;"
      echo "# hack/make-rules/verify-codegen.sh says what it covers and who trusts it)."
      echo "${key}"
    } >"${COMPONENT_PATCHES}/codegen.verified"
    log "update codegen-verified: ${c} line ${line}: recorded ${key:0:12} in $(component::rel_patches)/codegen.verified"
  done
done
exit "${rc}"
