#!/usr/bin/env bash
# Upstream's API conventions on the API types the patches change: the
# kube-api-linter with upstream's own settings and exceptions (derived from
# the tree's hack/golangci.yaml by hack/apilintconfig), run offline with its
# standalone binary (tools.sh kube-api-linter), on the packages under each
# component's API_LINT_PATHS (component.env) that its series touches, and
# only on the lines the series changed (--new-from-rev=base/<pin>).
# Upstream's verify-golangci-lint.sh cannot run here: it builds its plugins
# from hack/tools/golangci-lint, which the module zip lacks. A line with a Go
# toolchain of its own (LINE_GOTOOLCHAIN, line 1.38) is not linted, and says
# so: the pinned linter cannot type-check its tree.
#
# Usage: verify/api-lint.sh [component...]   (default: every component that sets API_LINT_PATHS)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

mapfile -t components < <(component::named_or_all "$@")
linter="${OUTPUT_BIN}/golangci-lint-kube-api-linter"
rc=0
for c in "${components[@]}"; do
  read -ra prefixes <<<"$(component::setting "${c}" API_LINT_PATHS)"
  [[ ${#prefixes[@]} -gt 0 ]] || continue
  component::load "${c}"
  component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run 'make apply COMPONENT=${c}'"
  if [[ "$(line::toolchain)" != local ]]; then
    # The linter is one of the shared tools, built with this machine's Go
    # (tools.sh): it refuses a module whose go directive is newer than that
    # Go, and built with the line's toolchain, its golang.org/x/tools cannot
    # read that toolchain's export data. Said, not hidden (docs/lines.md).
    log "  ${c}: NOT LINTED on line $(line::selected): kube-api-linter cannot type-check a tree of Go toolchain $(line::toolchain) (LINE_GOTOOLCHAIN) until hack/tools/kube-api-linter is bumped to a golangci-lint that reads it"
    continue
  fi
  [[ -x "${linter}" ]] || "${REPO_ROOT}/hack/make-rules/tools.sh" kube-api-linter
  pkgs=()
  while read -r d; do
    for p in "${prefixes[@]}"; do
      [[ "${d}/" == "${p%/}/"* ]] && pkgs+=("./${d}") && break
    done
  done < <(component::git diff --name-only --diff-filter=d "${COMPONENT_BASE_TAG}" -- '*.go' | xargs -r -n1 dirname | LC_ALL=C sort -u)
  if [[ ${#pkgs[@]} -eq 0 ]]; then
    log "  ${c}: the series touches no API package under ${prefixes[*]}"
    continue
  fi
  cfg="$(mktemp --suffix=.yaml)"
  (cd "${REPO_ROOT}" && go run ./hack/apilintconfig "${COMPONENT_TREE}/hack/golangci.yaml") >"${cfg}"
  log "  ${c}: kube-api-linter on ${pkgs[*]}, lines changed since ${COMPONENT_BASE_TAG}"
  if ! (cd "${COMPONENT_TREE}" && GOFLAGS='' "${linter}" run --config="${cfg}" \
    --new-from-rev="${COMPONENT_BASE_TAG}" "${pkgs[@]}"); then
    echo "kube-api-linter found issues in lines $(component::rel_patches) adds (above)" >&2
    rc=1
  fi
  rm -f "${cfg}"
done
exit "${rc}"
