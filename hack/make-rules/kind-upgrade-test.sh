#!/usr/bin/env bash
# make kind-upgrade-test: the adoption path on real kubelets (docs/kind.md,
# "From upstream to kube-guard and back"). A kind cluster of the line's node
# image whose control plane is pristine upstream's (kube-apiserver,
# kube-controller-manager, kube-scheduler and kube-proxy built here from the
# pinned release without our patches, as images of upstream's layout:
# build-pristine.sh, hack/imagebuild), then test/kindupgrade replaces the
# control plane's static pods in place, as an admin edits
# /etc/kubernetes/manifests:
#   1. pristine upstream: Deployments, a StatefulSet, a DaemonSet, budgets
#      and PriorityClasses are created and run;
#   2. kube-guard's kube-apiserver, kube-controller-manager and
#      kube-scheduler, every gate at its default;
#   3. the same with DisruptionPolicyInPriorityClass on, thresholds set;
#   4. pristine upstream again (the manifests of step 1);
#   5. kube-guard with the gate on again, where what was kept and lost is read.
# At every step: no workload pod restarted or recreated, no ReplicaSet or
# ControllerRevision created, the cluster schedules and runs new pods; the
# thresholds are kept and lost as docs/kep-3280.md ("Downgrade") says.
# The cluster is its own (a running kind cluster is refused) and is deleted
# at the end unless KIND_KEEP=1.
# Knobs: KIND_UPGRADE_TIMEOUT (go test -timeout, 30m), KIND_UPGRADE_RUN
# (go test -run), plus hack/lib/kind.sh's (KIND_WORKERS).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/version.sh"
source "${REPO_ROOT}/hack/lib/docker.sh"
source "${REPO_ROOT}/hack/lib/kind.sh"

KIND_UPGRADE_TIMEOUT="${KIND_UPGRADE_TIMEOUT:-30m}"
KIND_UPGRADE_RUN="${KIND_UPGRADE_RUN:-.}"
UPGRADE_DIR="${OUTPUT_DIR}/kind-upgrade$(line::path "" /)"

docker::ensure
kind::refuse_existing "this test brings up a cluster of its own, with upstream's control plane"

start_all="$(date +%s)"
# The fork's node image (kubelets, kubeadm, the fork's control-plane images
# tagged with the fork's version), of the patched tree (applied first on a
# fresh machine); kind-up checks that the image is this tree's build.
(component::load kubernetes && component::is_materialised) || "${REPO_ROOT}/hack/make-rules/apply.sh" kubernetes
read -r version _ < <(version::of kubernetes "make node-image")
if ! docker image inspect "kube-guard/node:${version}" >/dev/null 2>&1; then
  "${REPO_ROOT}/hack/make-rules/node-image.sh"
fi
# kind-up's kubectl (an image loaded into docker before _output was removed
# leaves it unbuilt).
[[ -x "$(line::bin)/kubectl" ]] || "${REPO_ROOT}/hack/make-rules/build.sh" kubectl

# Pristine upstream's control plane and kube-proxy, as release images.
PRISTINE_BINARIES_EXTRA="kube-proxy kube-log-runner" "${REPO_ROOT}/hack/make-rules/build-pristine.sh" kubernetes
read -r upstream_version upstream_epoch upstream_commit < <(
  component::load kubernetes
  commit="$(component::git rev-parse "${COMPONENT_BASE_TAG}^{commit}")"
  echo "${COMPONENT_VERSION} $(component::git log -1 --format=%ct "${commit}") ${commit}"
)
images="${UPGRADE_DIR}/images"
rm -rf "${UPGRADE_DIR}"
mkdir -p "${UPGRADE_DIR}"
IMAGES_OUT="${images}" IMAGES_ONLY_ROOTFS=1 SKIP_BUILD=1 "${REPO_ROOT}/hack/make-rules/images.sh"
go build -C "${REPO_ROOT}" -o "${OUTPUT_BIN}/imagebuild" ./hack/imagebuild
log "pristine upstream's images ${upstream_version} into ${images#"${REPO_ROOT}/"}"
"${OUTPUT_BIN}/imagebuild" build -spec "${REPO_ROOT}/build/images/images.yaml" -bin "$(line::bin)/pristine" \
  -rootfs "${images}.rootfs" -out "${images}" -components kubernetes \
  -version "kubernetes=${upstream_version}" -epoch "kubernetes=${upstream_epoch}" -commit "kubernetes=${upstream_commit}"
rm -rf "${images}.rootfs" "${images}/kubernetes-server-linux-amd64.tar.gz"

archives=()
for i in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
  archives+=("${images}/${i}.tar")
done
# The cluster goes at the end, also when it never became ready.
[[ "${KIND_KEEP:-0}" == "1" ]] || trap kind::teardown EXIT
KIND_FEATURE_GATES="" KIND_RUNTIME_CONFIG="" KIND_KUBERNETES_VERSION="${upstream_version}" \
  KIND_IMAGE_ARCHIVES="${archives[*]}" "${REPO_ROOT}/hack/make-rules/kind-up.sh"

log "kind upgrade test: ${upstream_version} (pristine upstream) -> ${version} (kube-guard) -> gate on -> ${upstream_version} -> ${version}, gate on"
start="$(date +%s)"
(
  cd "${REPO_ROOT}"
  KUBE_GUARD_UPGRADE_KUBECONFIG="${KIND_KUBECONFIG}" \
    KUBE_GUARD_UPGRADE_CONTROL_PLANE="${KIND_NAME}-control-plane" \
    KUBE_GUARD_UPGRADE_UPSTREAM_VERSION="${upstream_version}" \
    KUBE_GUARD_UPGRADE_FORK_VERSION="${version}" \
    KUBE_GUARD_UPGRADE_POD_IMAGE="$(docker exec "${KIND_NAME}-worker" ctr --namespace k8s.io images list --quiet | grep -m 1 '^registry.k8s.io/pause:')" \
    go test ./test/kindupgrade/... -count=1 -v -timeout "${KIND_UPGRADE_TIMEOUT}" -run "${KIND_UPGRADE_RUN}"
) || fatal "kind upgrade test failed (kind export logs --name ${KIND_NAME} collects the nodes' logs; KIND_KEEP=1 keeps the cluster)"
log "kind upgrade test: passed in $(($(date +%s) - start)) s ($(($(date +%s) - start_all)) s with the images and the cluster)"
