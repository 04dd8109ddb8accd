#!/usr/bin/env bash
# `make verify`: every check, each in its own script under verify/, each
# behind a toggle (SKIP_VERIFY="codegen shellcheck" skips those). Every check
# runs, a failure does not hide the next one; the failures are listed at the
# end and the exit code is non-zero if any failed. No check changes the
# checkout. The checks of a series (PER_LINE below) run on every release line
# (patches/<c>/<line>/), the others once. In order:
#   series            each patch series applies with `git am` to a fresh base
#   topics            each topic is listed and described (TOPIC.md), its
#                     patches say so, and it applies alone with its
#                     dependencies to a fresh base
#   export            exporting each tree gives back patches/ byte for byte
#   gofmt             the Go files the series touch, and this repository's
#   (shellcheck)      every shell script
#   trailers          every patch's Rebase-Policy, Topic (and Regenerate) trailers
#   versions          no pinned release written outside build/*/component.env
#   docs              README's generated blocks, docs/rebase-report.md current
#   upstream-examples docs/upstream/<c>/<topic>/ is what make upstream-pr
#                     writes of the current series
#   api-lint          upstream's kube-api-linter settings on the API lines the
#                     series add (components that set API_LINT_PATHS)
#   staging-overrides go.mod and staging-overrides/ match the patched tree
#   staging-replaces  the go.mod overlays of components built on another's
#                     staging modules are current
#   codegen           each component's generators leave its tree unchanged
#                     (which also covers upstream's verify scripts for the
#                     openapi spec, the API fixtures and the feature-gate lists)
#
# Usage: verify/all.sh [component...]   (default: every component)
# The checks about this repository's own files (shellcheck, versions, docs)
# always run; staging-overrides runs when a listed component sets
# REPO_MODULE_REPLACES.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

CHECKS=(series topics export gofmt shellcheck trailers versions docs upstream-examples debian-lock api-lint staging-overrides staging-replaces codegen)
PER_COMPONENT=" series topics export gofmt trailers api-lint staging-replaces codegen "
# The checks of a series, run on every release line (LINE=<line> each); the
# others look at the repository as a whole and the default line.
PER_LINE=" series topics export gofmt trailers api-lint codegen "

applicable() {
  local c
  case "$1" in
    staging-overrides)
      for c in "${components[@]}"; do
        [[ "$(component::setting "${c}" REPO_MODULE_REPLACES)" != true ]] || return 0
      done
      return 1
      ;;
    *) return 0 ;;
  esac
}

failed=()
default_line="$(line::default)"
# Newest line first: a line that does not apply must not hide the others.
for line in $(line::all | sort -rV); do
  export LINE="${line}"
  mapfile -t components < <(component::named_or_all "$@" | while read -r c; do
    if component::has_line "${c}"; then echo "${c}"; else log "verify: ${c} has no line ${line}" >&2; fi
  done)
  ((${#components[@]} > 0)) || continue
  log "verify: release line ${line} (${components[*]})"
  applied=1
  for c in "${components[@]}"; do
    "${REPO_ROOT}/hack/make-rules/apply.sh" "${c}" || applied=0
  done
  if [[ "${applied}" == 0 ]]; then
    log "verify: FAILED (line ${line}): its series does not apply (above); its other checks skipped"
    failed+=("apply (line ${line})")
    continue
  fi
  for check in "${CHECKS[@]}"; do
    [[ "${line}" == "${default_line}" || "${PER_LINE}" == *" ${check} "* ]] || continue
    if [[ " ${SKIP_VERIFY:-} " == *" ${check} "* ]]; then
      log "verify ${check}: skipped"
      continue
    fi
    if ! applicable "${check}"; then
      log "verify ${check}: not applicable to ${components[*]}"
      continue
    fi
    log "verify ${check}"
    args=()
    [[ "${PER_COMPONENT}" != *" ${check} "* ]] || args=("${components[@]}")
    if "$(dirname "${BASH_SOURCE[0]}")/${check}.sh" "${args[@]}"; then
      log "verify ${check}: ok"
    else
      log "verify ${check}: FAILED (line ${line})"
      failed+=("${check} (line ${line})")
    fi
  done
done
if [[ ${#failed[@]} -gt 0 ]]; then
  log "verify: ${#failed[@]} check(s) failed: ${failed[*]}"
  exit 1
fi
log "verify: every check passed"
