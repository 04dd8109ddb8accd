#!/usr/bin/env bash
# Builds the patched Kubernetes binaries into _output/bin/, the way upstream's
# hack/lib/golang.sh builds release binaries: CGO_ENABLED=0, -trimpath,
# tags selinux,notest,grpcnotrace, -s -w, and version-stamped (hack/lib/version.sh).
# Materialises the tree and applies patches/kubernetes first when needed.
# Go's build cache and the build id in each binary make a re-run with nothing
# changed a no-op.
#
# Usage: build.sh [binary...]   (default: kube-apiserver kube-scheduler
#                                kube-controller-manager kubectl)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/version.sh"

component::load kubernetes
if [[ -z "${SKIP_APPLY:-}" ]]; then
  "${REPO_ROOT}/hack/make-rules/apply.sh" kubernetes
fi

binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=(kube-apiserver kube-scheduler kube-controller-manager kubectl)
pkgs=()
for b in "${binaries[@]}"; do
  [[ -d "${COMPONENT_TREE}/cmd/${b}" ]] || fatal "unknown binary ${b}: ${COMPONENT_TREE}/cmd/${b} does not exist"
  pkgs+=("./cmd/${b}")
done

version::vars
ldflags="all=$(version::ldflags k8s.io/client-go/pkg/version k8s.io/component-base/version) -s -w"
mkdir -p "${OUTPUT_BIN}"
log "building ${binaries[*]} ${FORK_GIT_VERSION} (${FORK_GIT_COMMIT:0:12}, ${FORK_GIT_TREE_STATE})"
(
  cd "${COMPONENT_TREE}"
  CGO_ENABLED=0 GOFLAGS= go build -trimpath -tags selinux,notest,grpcnotrace \
    -ldflags "${ldflags}" -o "${OUTPUT_BIN}/" "${pkgs[@]}"
)
for b in "${binaries[@]}"; do
  log "  ${OUTPUT_BIN}/${b}"
done
