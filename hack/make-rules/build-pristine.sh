#!/usr/bin/env bash
# Builds pristine upstream Kubernetes binaries, without our patches, into
# _output/bin/pristine/, for the tests of version skew and downgrade (a
# patched kube-apiserver's objects read and written by upstream's on the same
# etcd). The source is the base tag of the materialised tree (the upstream
# module plus the offline-build adjustments), extracted to
# _output/pristine/kubernetes; the flags are build.sh's, and the version stamp
# is upstream's own (e.g. v1.37.1, tree state clean, the base commit).
# Go's build cache shares every package the patches do not touch with the
# patched build.
#
# Usage: build-pristine.sh [binary...]   (default: kube-apiserver)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=(kube-apiserver)

component::load kubernetes
component::is_materialised || "${REPO_ROOT}/hack/make-rules/materialize.sh" kubernetes
tree="$(component::extract_pristine)"
out="${OUTPUT_BIN}/pristine"

pkgs=()
for b in "${binaries[@]}"; do
  [[ -d "${tree}/cmd/${b}" ]] || fatal "unknown binary ${b}: ${tree}/cmd/${b} does not exist"
  pkgs+=("./cmd/${b}")
done

[[ "${COMPONENT_VERSION}" =~ ^v([0-9]+)\.([0-9]+)\. ]] || fatal "cannot parse ${COMPONENT_VERSION}"
FORK_GIT_MAJOR="${BASH_REMATCH[1]}"
FORK_GIT_MINOR="${BASH_REMATCH[2]}"
FORK_GIT_VERSION="${COMPONENT_VERSION}"
FORK_GIT_COMMIT="$(component::git rev-parse "${COMPONENT_BASE_TAG}^{commit}")"
FORK_GIT_TREE_STATE=clean
SOURCE_DATE_EPOCH="$(component::git log -1 --format=%ct "${FORK_GIT_COMMIT}")"
FORK_BUILD_DATE="$(date --date="@${SOURCE_DATE_EPOCH}" -u +'%Y-%m-%dT%H:%M:%SZ')"
source "${REPO_ROOT}/hack/lib/version.sh"
ldflags="all=$(version::ldflags k8s.io/client-go/pkg/version k8s.io/component-base/version) -s -w"

log "building pristine ${binaries[*]} ${FORK_GIT_VERSION} (${FORK_GIT_COMMIT:0:12}) from ${tree}"
mkdir -p "${out}"
(
  cd "${tree}"
  env CGO_ENABLED=0 GOFLAGS= go build -trimpath -tags selinux,notest,grpcnotrace \
    -ldflags "${ldflags}" -o "${out}/" "${pkgs[@]}"
)
for b in "${binaries[@]}"; do
  log "  ${out}/${b}"
done
