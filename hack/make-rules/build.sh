#!/usr/bin/env bash
# Builds the patched binaries into _output/bin/, version-stamped
# (hack/lib/version.sh), each from the materialised tree of its component.
# Materialises the tree and applies patches/<component> first when needed
# (SKIP_APPLY=1 skips that). Go's build cache and the build id in each binary
# make a re-run with nothing changed a no-op.
#
#   kubernetes   the way upstream's hack/lib/golang.sh builds release
#                binaries: CGO_ENABLED=0, -trimpath, tags
#                selinux,notest,grpcnotrace, -s -w.
#   descheduler  the way upstream's Makefile (`make build`) does:
#                CGO_ENABLED=0 and its -X flags in
#                sigs.k8s.io/descheduler/pkg/version, plus -trimpath. Its
#                go.mod (base commit) replaces the k8s.io/* staging modules
#                with the patched ones of _output/src/kubernetes, so
#                patches/kubernetes is applied first too.
#
# Usage: build.sh [binary...]   (default: kube-apiserver kube-scheduler
#                                kube-controller-manager kubectl)
# A binary that a component lists in BINARIES (build/<component>/component.env,
# e.g. `build.sh descheduler`) is built from that component, any other from
# kubernetes (./cmd/<binary>).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/version.sh"

# component_of BINARY: the component whose BINARIES lists BINARY, else kubernetes.
component_of() {
  local env c b
  for env in "${REPO_ROOT}"/build/*/component.env; do
    c="$(basename "$(dirname "${env}")")"
    for b in $(component::setting "${c}" BINARIES); do
      if [[ "${b}" == "$1" ]]; then
        echo "${c}"
        return
      fi
    done
  done
  echo kubernetes
}

# check_binaries BINARY...: ./cmd/<binary> of each must exist in the loaded tree.
check_binaries() {
  local b
  for b in "$@"; do
    [[ -d "${COMPONENT_TREE}/cmd/${b}" ]] || fatal "unknown binary ${b}: ${COMPONENT_TREE}/cmd/${b} does not exist"
  done
}

# go_build BINARY...: builds ./cmd/<binary> of the loaded tree into
# ${OUTPUT_BIN}, with CGO_ENABLED=0 and -trimpath, and from the caller the
# -ldflags in ${ldflags}, the environment in ${go_env[@]} and the other
# `go build` flags in ${go_flags[@]}.
go_build() {
  local -a pkgs=()
  local b
  for b in "$@"; do pkgs+=("./cmd/${b}"); done
  mkdir -p "${OUTPUT_BIN}"
  (
    cd "${COMPONENT_TREE}"
    env CGO_ENABLED=0 "${go_env[@]}" go build -trimpath "${go_flags[@]}" -ldflags "${ldflags}" -o "${OUTPUT_BIN}/" "${pkgs[@]}"
  )
  for b in "$@"; do
    log "  ${OUTPUT_BIN}/${b}"
  done
}

build::kubernetes() {
  local -a binaries=("$@")
  local ldflags
  local -a go_env=(GOFLAGS=) go_flags=(-tags selinux,notest,grpcnotrace)
  component::load kubernetes
  if [[ -z "${SKIP_APPLY:-}" ]]; then
    "${REPO_ROOT}/hack/make-rules/apply.sh" kubernetes
  fi
  check_binaries "${binaries[@]}"

  version::vars
  ldflags="all=$(version::ldflags k8s.io/client-go/pkg/version k8s.io/component-base/version) -s -w"
  log "building ${binaries[*]} ${FORK_GIT_VERSION} (${FORK_GIT_COMMIT:0:12}, ${FORK_GIT_TREE_STATE})"
  go_build "${binaries[@]}"
}

build::descheduler() {
  local -a binaries=("$@")
  local ldflags from
  local -a go_env=(GOWORK=off GOFLAGS=) go_flags=()
  from="$(component::setting descheduler STAGING_FROM)"
  if [[ -z "${SKIP_APPLY:-}" ]]; then
    [[ -z "${from}" ]] || "${REPO_ROOT}/hack/make-rules/apply.sh" "${from}"
    "${REPO_ROOT}/hack/make-rules/apply.sh" descheduler
  fi
  if [[ -n "${from}" ]]; then
    component::load "${from}"
    component::is_materialised ||
      fatal "${COMPONENT_TREE} is not materialised: the descheduler builds against its staging modules (run 'make apply')"
  fi
  component::load descheduler
  check_binaries "${binaries[@]}"

  version::vars
  ldflags="$(version::descheduler_ldflags sigs.k8s.io/descheduler/pkg/version)"
  log "building ${binaries[*]} ${FORK_GIT_VERSION} (${FORK_GIT_COMMIT:0:12}, ${FORK_GIT_TREE_STATE}), k8s.io/* from ${from:+_output/src/}${from:-the proxy}"
  go_build "${binaries[@]}"
}

binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=(kube-apiserver kube-scheduler kube-controller-manager kubectl)
# Group the binaries by component, components in the order they first appear.
declare -A by_component=()
order=()
for b in "${binaries[@]}"; do
  c="$(component_of "${b}")"
  [[ -n "${by_component[${c}]:-}" ]] || order+=("${c}")
  by_component[${c}]+="${b} "
done
for c in "${order[@]}"; do
  declare -F "build::${c}" >/dev/null || fatal "no build recipe for component ${c} in ${BASH_SOURCE[0]}"
  # A subshell each: version::vars exports SOURCE_DATE_EPOCH, the date of that component's HEAD.
  # shellcheck disable=SC2086
  ("build::${c}" ${by_component[${c}]})
done
