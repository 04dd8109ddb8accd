#!/usr/bin/env bash
# Runs upstream's own tests for every Go package the patch series touches:
# unit tests of the touched packages, and the integration tests among them
# (test/integration/...) with the project's etcd first on PATH, as upstream's
# test/integration/framework expects.
#
# Usage: test-upstream.sh [--list | go test flags...]
#   --list  print the unit and integration packages that would be tested
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

component::load kubernetes
component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run 'make apply' first"

# touched_dirs: the package directories of the files changed on top of base.
# A changed file that is not Go code (testdata, fixtures) belongs to the
# nearest enclosing directory that holds Go files. When anything is touched,
# the packages of build/kubernetes/always-test-packages are tested too.
touched_dirs() {
  local f d
  component::git diff --name-only --diff-filter=d "${COMPONENT_BASE_TAG}" -- | while read -r f; do
    d="$(dirname "${f}")"
    while [[ "${d}" != "." ]] && ! compgen -G "${COMPONENT_TREE}/${d}/*.go" >/dev/null; do
      d="$(dirname "${d}")"
    done
    [[ "${d}" != "." ]] && echo "${d}"
  done | LC_ALL=C sort -u
}

mapfile -t dirs < <(touched_dirs)
if [[ ${#dirs[@]} -eq 0 ]]; then
  log "patches/${COMPONENT_NAME} touches no Go package: no upstream tests to run"
  exit 0
fi
unit=()
integration=()
# Plus the cross-cutting packages of build/kubernetes/always-test-packages.
while read -r d; do
  d="${d#./}"
  [[ -n "${d}" && ! " ${dirs[*]} " == *" ${d} "* ]] && dirs+=("${d}")
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "${REPO_ROOT}/build/kubernetes/always-test-packages")
for d in "${dirs[@]}"; do
  case "${d}" in
    test/integration/*) integration+=("./${d}") ;;
    test/e2e*|test/e2e_node/*) ;; # needs a running cluster; covered by test/e2e of this repo
    *) unit+=("./${d}") ;;
  esac
done

if [[ "${1:-}" == "--list" ]]; then
  [[ ${#unit[@]} -eq 0 ]] || printf 'unit %s\n' "${unit[@]}"
  [[ ${#integration[@]} -eq 0 ]] || printf 'integration %s\n' "${integration[@]}"
  exit 0
fi

export PATH="${OUTPUT_BIN}:${PATH}"
cd "${COMPONENT_TREE}"
status=0
if [[ ${#unit[@]} -gt 0 ]]; then
  log "upstream unit tests of ${#unit[@]} touched packages"
  GOFLAGS= go test "$@" "${unit[@]}" || status=1
fi
if [[ ${#integration[@]} -gt 0 ]]; then
  command -v etcd >/dev/null || fatal "etcd is not in ${OUTPUT_BIN}: run 'make tools'"
  log "upstream integration tests of ${#integration[@]} touched packages (etcd: $(command -v etcd))"
  GOFLAGS= go test -timeout 40m "$@" "${integration[@]}" || status=1
fi
exit "${status}"
