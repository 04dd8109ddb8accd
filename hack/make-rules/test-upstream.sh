#!/usr/bin/env bash
# Runs upstream's own tests for every Go package a patch series touches, for
# each component (build/*/component.env): unit tests of the touched
# packages, and for kubernetes the integration tests among them
# (test/integration/...) with the project's etcd first on PATH, as upstream's
# test/integration/framework expects.
#
# build/<component>/always-test-packages lists packages tested whenever the
# series touches an API package (staging/src/k8s.io/api/..., pkg/apis/...); build/<component>/known-failures lists upstream
# tests that fail on the pristine base too (go test -skip patterns, one a
# line, each with the reason and a reproduction).
#
# Usage: test-upstream.sh [--list | go test flags...]
#   --list  print the unit and integration packages that would be tested
#   TEST_UPSTREAM_COMPONENTS="kubernetes" restricts it (default: every component).
#   TEST_UPSTREAM_UNIT_ONLY=1 runs the unit tests only (make test on a line
#   with MAKE_TEST_SCOPE=unit).
#   TEST_UPSTREAM_SKIP_DIRS="<dir> ..." leaves those touched packages (paths
#   in the component's tree) out, each named in the log (make test on a line
#   whose line.env sets MAKE_TEST_SKIP_DIRS).
#   COMPONENT_TREE_AT=<dir> tests that checkout of the component (a git
#   worktree of its tree, on its base tag) instead of _output/src/<c>: what
#   `make topic-test` runs on a tree of one topic and its dependencies.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/testlog.sh"

# test_component NAME ARGS...: tests one component; returns 1 on failure.
test_component() {
  component::load "$1"
  shift
  component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run 'make apply COMPONENT=${COMPONENT_NAME}$(line::hint)' first"
  local dirs unit=() integration=() d skip status=0
  mapfile -t dirs < <(touched_go_dirs "${COMPONENT_TREE}" "${COMPONENT_BASE_TAG}")
  if [[ ${#dirs[@]} -eq 0 ]]; then
    log "$(component::rel_patches) touches no Go package: no upstream tests to run"
    return 0
  fi
  # The packages that check every API type at once, when the series touches
  # an API package (an API type, its validation or defaulting).
  if printf '%s\n' "${dirs[@]}" | grep -qE '^(staging/src/k8s\.io/api|pkg/apis)(/|$)'; then
    while read -r d; do
      d="${d#./}"
      [[ -n "${d}" && ! " ${dirs[*]} " == *" ${d} "* ]] && dirs+=("${d}")
    done < <(component::list_file always-test-packages)
  fi
  for d in "${dirs[@]}"; do
    if [[ " ${TEST_UPSTREAM_SKIP_DIRS:-} " == *" ${d} "* ]]; then
      log "${COMPONENT_NAME}: ${d} left out (TEST_UPSTREAM_SKIP_DIRS)"
      continue
    fi
    case "${d}" in
      test/integration/*) integration+=("./${d}") ;;
      test/e2e*) ;; # needs a running cluster; covered by test/e2e of this repo
      *) unit+=("./${d}") ;;
    esac
  done
  skip="$(component::skip_pattern)"

  if [[ "${LIST_ONLY}" == "1" ]]; then
    [[ ${#unit[@]} -eq 0 ]] || printf "${COMPONENT_NAME} unit %s\n" "${unit[@]}"
    [[ ${#integration[@]} -eq 0 ]] || printf "${COMPONENT_NAME} integration %s\n" "${integration[@]}"
    [[ -z "${skip}" ]] || printf "${COMPONENT_NAME} skip %s\n" "${skip}"
    return 0
  fi

  local skipflag=()
  [[ -z "${skip}" ]] || skipflag=(-skip "${skip}")
  (
    export PATH="${OUTPUT_BIN}:${PATH}"
    cd "${COMPONENT_TREE}"
    if [[ ${#unit[@]} -gt 0 ]]; then
      log "${COMPONENT_NAME}: upstream unit tests of ${#unit[@]} touched packages"
      GOFLAGS='' testlog::run "${COMPONENT_LINE}-${COMPONENT_NAME}-unit" go test "${skipflag[@]}" "$@" "${unit[@]}" || status=1
    fi
    if [[ ${#integration[@]} -gt 0 && "${TEST_UPSTREAM_UNIT_ONLY:-0}" == 1 ]]; then
      log "${COMPONENT_NAME}: TEST_UPSTREAM_UNIT_ONLY=1: the integration tests of ${#integration[@]} touched packages skipped"
    elif [[ ${#integration[@]} -gt 0 ]]; then
      command -v etcd >/dev/null || fatal "etcd is not in ${OUTPUT_BIN}: run 'make tools'"
      log "${COMPONENT_NAME}: upstream integration tests of ${#integration[@]} touched packages (etcd: $(command -v etcd))"
      GOFLAGS='' testlog::run "${COMPONENT_LINE}-${COMPONENT_NAME}-integration" go test -timeout 40m "${skipflag[@]}" "$@" "${integration[@]}" || status=1
    fi
    exit "${status}"
  )
}

LIST_ONLY=0
if [[ "${1:-}" == "--list" ]]; then
  LIST_ONLY=1
  shift
fi
status=0
for component in ${TEST_UPSTREAM_COMPONENTS:-$(component::all)}; do
  test_component "${component}" "$@" || status=1
done
exit "${status}"
