#!/usr/bin/env bash
# `make verify`: every check runs (a failure does not hide the next one), and
# the exit code is non-zero if any failed.
#   series           each patch series applies with `git am` to a fresh
#                    checkout of its pristine base (not the working tree)
#   export           exporting the tree gives back patches/ byte for byte
#   gofmt            Go files the series touches, and this repo's Go files
#   trailers         every patch has a Rebase-Policy trailer, and a Regenerate
#                    trailer when it changes generated files (verify/trailers.sh)
#   versions         no pinned release written outside build/*/component.env
#                    (verify/versions.sh)
#   docs             the generated blocks of README.md are current (verify/docs.sh)
#   staging-overrides go.mod and staging-overrides/ match the tree
#   staging-replaces the go.mod/go.sum overlays that put a component (the
#                    descheduler) on the patched staging modules are up to date
#   codegen          each component's generators (build/<c>/codegen.sh, upstream's
#                    own) leave its patched tree unchanged
# Skip a check with e.g. SKIP_VERIFY="codegen".
#
# Usage: verify.sh [component...]   (default: every component under build/)
# staging-overrides concerns the kubernetes tree and runs only when
# kubernetes is among the components; staging-replaces checks the listed
# components that set STAGING_FROM.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

components=("$@")
[[ ${#components[@]} -gt 0 ]] || mapfile -t components < <(component::all)
for c in "${components[@]}"; do
  component::load "${c}"
done
# verifying CHECK: whether CHECK applies to the components being verified.
verifying() {
  local c
  case "$1" in
    staging_overrides)
      for c in "${components[@]}"; do
        [[ "$(component::setting "${c}" REPO_MODULE_REPLACES)" != true ]] || return 0
      done
      return 1
      ;;
    staging_replaces)
      for c in "${components[@]}"; do
        [[ -z "$(component::setting "${c}" STAGING_FROM)" ]] || return 0
      done
      return 1
      ;;
    *) return 0 ;;
  esac
}
for c in "${components[@]}"; do
  "${REPO_ROOT}/hack/make-rules/apply.sh" "${c}"
done

verify_series() {
  local c wt rc=0
  for c in "${components[@]}"; do
    component::load "${c}"
    wt="$(mktemp -d)"
    component::git worktree add --quiet --detach "${wt}/tree" "${COMPONENT_BASE_TAG}"
    local p n=0
    while read -r p; do
      [[ -n "${p}" ]] || continue
      if ! (COMPONENT_TREE="${wt}/tree" component::git am --quiet --3way --keep-cr "${p}"); then
        echo "patches/${c}/$(basename "${p}") does not apply to a fresh ${COMPONENT_BASE_TAG}" >&2
        rc=1
        break
      fi
      n=$((n + 1))
    done < <(component::series_files)
    if [[ ${rc} -eq 0 ]]; then
      log "  ${c}: ${n} patches apply to a fresh ${COMPONENT_BASE_TAG}"
    fi
    component::git worktree remove --force "${wt}/tree"
    rm -rf "${wt}"
  done
  return "${rc}"
}

verify_export() {
  local c tmp rc=0
  for c in "${components[@]}"; do
    component::load "${c}"
    tmp="$(mktemp -d)"
    component::format_patches "${tmp}"
    mkdir -p "${COMPONENT_PATCHES}"
    if ! diff -r --exclude=.gitkeep "${COMPONENT_PATCHES}" "${tmp}" >&2; then
      echo "patches/${c} differs from an export of ${COMPONENT_TREE} (see the diff above)" >&2
      rc=1
    fi
    rm -rf "${tmp}"
  done
  return "${rc}"
}

verify_gofmt() {
  local c files=() bad
  for c in "${components[@]}"; do
    component::load "${c}"
    while read -r f; do
      files+=("${COMPONENT_TREE}/${f}")
    done < <(component::git diff --name-only --diff-filter=d "${COMPONENT_BASE_TAG}" -- '*.go')
  done
  while read -r f; do
    files+=("${f}")
  done < <(cd "${REPO_ROOT}" && git ls-files --cached --others --exclude-standard -- '*.go' | sed "s#^#${REPO_ROOT}/#")
  [[ ${#files[@]} -gt 0 ]] || return 0
  # gofmt fails, printing nothing on stdout, on a file it cannot parse.
  bad="$(gofmt -l "${files[@]}")" || {
    echo "gofmt could not parse some files (see above)" >&2
    return 1
  }
  if [[ -n "${bad}" ]]; then
    printf 'not gofmt-clean:\n%s\n' "${bad}" >&2
    return 1
  fi
}

# The update script must find nothing to change.
verify_staging_overrides() {
  local before after
  snapshot() { cat "${REPO_ROOT}/go.mod"; (cd "${REPO_ROOT}" && find staging-overrides -printf '%p %y %l\n' | LC_ALL=C sort); }
  before="$(snapshot)"
  # (errexit does not hold inside a check: verify.sh calls it in an `if`.)
  "${REPO_ROOT}/hack/make-rules/update-staging-overrides.sh" || return 1
  after="$(snapshot)"
  if [[ "${before}" != "${after}" ]]; then
    diff <(echo "${before}") <(echo "${after}") >&2 || true
    echo "go.mod or staging-overrides/ were out of date (now updated): review and commit them" >&2
    return 1
  fi
}

# Same for the go.mod/go.sum of components built on the patched staging modules.
verify_staging_replaces() {
  local before after c
  local -a with_staging=()
  for c in "${components[@]}"; do
    [[ -z "$(component::setting "${c}" STAGING_FROM)" ]] || with_staging+=("${c}")
  done
  snapshot() {
    (cd "${REPO_ROOT}" && find build -path 'build/*/overlay/go.mod' -o -path 'build/*/overlay/go.sum' | LC_ALL=C sort | xargs -r sha256sum)
  }
  before="$(snapshot)"
  # (errexit does not hold inside a check: verify.sh calls it in an `if`.)
  "${REPO_ROOT}/hack/make-rules/update-staging-replaces.sh" "${with_staging[@]}" || return 1
  after="$(snapshot)"
  if [[ "${before}" != "${after}" ]]; then
    diff <(echo "${before}") <(echo "${after}") >&2 || true
    echo "build/*/overlay/go.mod or go.sum were out of date (now updated): review and commit them" >&2
    return 1
  fi
}

# Every component's generators (its codegen hook) leave its patched tree
# unchanged.
verify_codegen() {
  local c rc=0
  for c in "${components[@]}"; do
    "${REPO_ROOT}/hack/make-rules/verify-codegen.sh" "${c}" || rc=1
  done
  return "${rc}"
}

# The checks that live in verify/<name>.sh.
verify_versions() { "${REPO_ROOT}/hack/make-rules/verify/versions.sh"; }
verify_docs() { "${REPO_ROOT}/hack/make-rules/verify/docs.sh"; }
verify_trailers() { "${REPO_ROOT}/hack/make-rules/verify/trailers.sh" "${components[@]}"; }

status=0
for check in series export gofmt trailers versions docs staging_overrides staging_replaces codegen; do
  if [[ " ${SKIP_VERIFY:-} " == *" ${check//_/-} "* ]]; then
    log "verify ${check//_/-}: skipped"
    continue
  fi
  if ! verifying "${check}"; then
    log "verify ${check//_/-}: not applicable to ${components[*]}"
    continue
  fi
  log "verify ${check//_/-}"
  if "verify_${check}"; then
    log "verify ${check//_/-}: ok"
  else
    log "verify ${check//_/-}: FAILED"
    status=1
  fi
done
exit "${status}"
