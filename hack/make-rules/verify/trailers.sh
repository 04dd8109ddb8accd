#!/usr/bin/env bash
# Every patch says what it is for a rebase, in trailers of its message that
# rebase.sh and rebase-report.sh read:
#   Rebase-Policy: carry                        ours: kept at every rebase
#   Rebase-Policy: drop-when-upstream <URL>     a backport: dropped once the
#                                               upstream change (<URL>) is in
#                                               the release (it applies empty)
#   Topic: <topic>                              the topic it belongs to (its
#                                               folder under patches/<c>/<line>/;
#                                               verify/topics.sh checks it)
#   Regenerate: <step>...                       the component's codegen steps
#                                               (build/<c>/codegen.sh) that
#                                               write this patch's generated
#                                               files; required when the patch
#                                               touches GENERATED_PATHS
# Fails, listing every patch at fault, otherwise.
#
# Usage: verify/trailers.sh [component...]   (default: every component)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

mapfile -t components < <(component::named_or_all "$@")
bad=0
complain() { printf '%s\n' "$*" >&2; bad=1; }
for c in "${components[@]}"; do
  component::load "${c}"
  hook="${REPO_ROOT}/build/${c}/codegen.sh"
  steps=""
  [[ ! -f "${hook}" ]] || steps="$(sed -n 's/^ALL_STEPS=(\(.*\))$/\1/p' "${hook}")"
  while read -r p; do
    [[ -n "${p}" ]] || continue
    name="$(component::rel_patches)/$(component::patch_name "${p}")"
    trailers="$(sed -n '/^$/,/^---$/p' "${p}" | git interpret-trailers --parse)"
    policy="$(sed -n 's/^Rebase-Policy: //p' <<<"${trailers}")"
    if [[ -z "${policy}" ]]; then
      complain "${name}: no Rebase-Policy trailer (carry, or drop-when-upstream <URL>)"
    elif [[ "$(wc -l <<<"${policy}")" -gt 1 ]]; then
      complain "${name}: more than one Rebase-Policy trailer"
    elif ! [[ "${policy}" == carry || "${policy}" =~ ^drop-when-upstream\ https?://[^[:space:]]+$ ]]; then
      complain "${name}: Rebase-Policy '${policy}' is neither 'carry' nor 'drop-when-upstream <URL>'"
    fi
    [[ -n "$(sed -n 's/^Topic: //p' <<<"${trailers}")" ]] || complain "${name}: no Topic trailer (the topic it belongs to: docs/development.md)"
    regen="$(sed -n 's/^Regenerate: //p' <<<"${trailers}" | tr '\n' ' ')"
    for s in ${regen}; do
      [[ "${s}" == all || " ${steps} " == *" ${s} "* ]] || complain "${name}: Regenerate step '${s}' is not one of build/${c}/codegen.sh's (all ${steps})"
    done
    if [[ -z "${regen// /}" ]]; then
      while read -r f; do
        if component::is_generated "${f}"; then
          complain "${name}: changes the generated file ${f} but has no Regenerate trailer (a rebase could not regenerate it)"
          break
        fi
      done < <(sed -n 's#^diff --git a/\([^ ]*\) b/.*#\1#p' "${p}")
    fi
  done < <(component::series_files)
done
[[ "${bad}" -eq 0 ]] || exit 1
log "verify trailers: every patch of ${components[*]} says what it is for a rebase"
