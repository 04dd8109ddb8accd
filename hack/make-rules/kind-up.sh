#!/usr/bin/env bash
# make kind-up: a kind cluster of real kubelets on the kube-guard node image
# (`make node-image`): one control-plane node and KIND_WORKERS workers, the
# fork's gates on in every component (kubelets included), the EvictionRequest
# API served when its gate is on, and `failCgroupV1: false` for the kubelets
# where the host is on cgroup v1 (Kubernetes 1.37's kubelet refuses it
# otherwise). Knobs: hack/lib/kind.sh. The kubeconfig is
# _output/kind/kubeconfig; `make kind-down` deletes the cluster.
# LINE=<line> runs the node image of that release line (`make node-image
# LINE=<line>`) with the gates of its KEPs; where the image carries other
# etcd or CoreDNS releases than the line's kubeadm names
# (/kind/kube-guard/image-tags), kubeadm is given their tags.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/version.sh"
source "${REPO_ROOT}/hack/lib/docker.sh"
source "${REPO_ROOT}/hack/lib/kind.sh"

# Settings first: nothing is started for a run that cannot succeed.
[[ "${KIND_WORKERS}" =~ ^[0-9]+$ ]] || fatal "KIND_WORKERS=${KIND_WORKERS} is not a number"
[[ "${KIND_WAIT}" =~ ^[0-9]+$ ]] || fatal "KIND_WAIT=${KIND_WAIT} is not a number of seconds"
[[ "${KIND_API_SERVER_PORT}" =~ ^[0-9]+$ ]] && ((KIND_API_SERVER_PORT < 65536)) ||
  fatal "KIND_API_SERVER_PORT=${KIND_API_SERVER_PORT} is not a port number (0: kind picks a free one)"
if ((KIND_API_SERVER_PORT != 0)) && port_busy "${KIND_API_SERVER_PORT}"; then
  fatal "port ${KIND_API_SERVER_PORT} on 127.0.0.1 (KIND_API_SERVER_PORT) is in use by another process; free it, choose another, or leave it unset so that kind picks a free one"
fi
if [[ -n "${KIND_KUBERNETES_VERSION}" ]] && ! [[ "${KIND_KUBERNETES_VERSION}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$ ]]; then
  fatal "KIND_KUBERNETES_VERSION=${KIND_KUBERNETES_VERSION} is not a Kubernetes version (vMAJOR.MINOR.PATCH[-PRE])"
fi
read -ra archives <<<"${KIND_IMAGE_ARCHIVES}"
for a in "${archives[@]}"; do
  [[ -f "${a}" && -r "${a}" ]] || fatal "KIND_IMAGE_ARCHIVES: ${a} is not a readable file"
done
read -r version _ < <(version::of kubernetes "make node-image")
image="${KIND_NODE_IMAGE:-kube-guard/node:${version}}"
[[ "${version}" =~ ^v([0-9]+)\.([0-9]+)\. ]] || fatal "cannot read the minor release of ${version}"
previous_minor="${BASH_REMATCH[1]}.$((BASH_REMATCH[2] - 1))"

docker::ensure
# A cluster, or node containers a teardown could not remove.
kind::refuse_existing
docker image inspect "${image}" >/dev/null 2>&1 || fatal "no node image ${image} in docker: run make node-image$(line::hint)"
# A node image of another build would test something else.
image_version="$(docker run --rm --entrypoint cat "${image}" /kind/version)" || fatal "${image} has no /kind/version: not a kind node image"
[[ "${image_version}" == "${version}" ]] ||
  fatal "${image} is a node image of ${image_version}, this tree builds ${version}: run make node-image$(line::hint) (or set KIND_NODE_IMAGE)"
# The etcd and CoreDNS tags the image carries where kubeadm names others
# (an older line's node image; none before the file existed).
image_tags="$(docker run --rm --entrypoint sh "${image}" -c 'cat /kind/kube-guard/image-tags 2>/dev/null || true')" ||
  fatal "could not read /kind/kube-guard/image-tags of ${image}"
etcd_image_tag="$(awk '$1 == "etcd" { print $2 }' <<<"${image_tags}")"
coredns_image_tag="$(awk '$1 == "coredns" { print $2 }' <<<"${image_tags}")"

mkdir -p "${KIND_DIR}"
config="${KIND_DIR}/config.yaml"
{
  echo "kind: Cluster"
  echo "apiVersion: kind.x-k8s.io/v1alpha4"
  echo "name: ${KIND_NAME}"
  if [[ -n "${KIND_FEATURE_GATES}" ]]; then
    echo "featureGates:"
    tr ',' '\n' <<<"${KIND_FEATURE_GATES}" | while IFS='=' read -r gate value; do
      [[ -n "${gate}" ]] && echo "  ${gate}: ${value:-true}"
    done
  fi
  if [[ -n "${KIND_RUNTIME_CONFIG}" ]]; then
    echo "runtimeConfig:"
    tr ',' '\n' <<<"${KIND_RUNTIME_CONFIG}" | while IFS='=' read -r api value; do
      [[ -n "${api}" ]] && echo "  \"${api}\": \"${value:-true}\""
    done
  fi
  if ((KIND_API_SERVER_PORT != 0)); then
    echo "networking:"
    echo "  apiServerAddress: 127.0.0.1"
    echo "  apiServerPort: ${KIND_API_SERVER_PORT}"
  fi
  # extra_mounts: the archives of KIND_IMAGE_ARCHIVES in a node, where the
  # node image's preload imports them with its own (/kind/images/*.tar).
  extra_mounts() {
    local i=0 a
    ((${#archives[@]} > 0)) || return 0
    echo "  extraMounts:"
    for a in "${archives[@]}"; do
      echo "  - {hostPath: \"$(realpath "${a}")\", containerPath: \"/kind/images/extra-${i}-$(basename "${a}")\", readOnly: true}"
      i=$((i + 1))
    done
  }
  echo "nodes:"
  echo "- role: control-plane"
  extra_mounts
  # The workers carry the labels of the local cluster's KWOK nodes (an
  # index, a zone of two), so that the e2e tests can aim pods at a node.
  for ((i = 0; i < KIND_WORKERS; i++)); do
    echo "- role: worker"
    echo "  labels: {type: kind, kube-guard.io/node-index: \"${i}\", topology.kubernetes.io/zone: zone-$((i % 2))}"
    extra_mounts
  done
  if [[ ! -f /sys/fs/cgroup/cgroup.controllers || -n "${etcd_image_tag}${coredns_image_tag}${KIND_KUBERNETES_VERSION}" ]]; then
    echo "kubeadmConfigPatches:"
  fi
  if [[ ! -f /sys/fs/cgroup/cgroup.controllers ]]; then
    # cgroup v1 host: the kubelets must be told it is accepted.
    cat <<'YAML'
- |
  kind: KubeletConfiguration
  failCgroupV1: false
YAML
  fi
  if [[ -n "${etcd_image_tag}${coredns_image_tag}${KIND_KUBERNETES_VERSION}" ]]; then
    # The node image's etcd and CoreDNS, where kubeadm would name others;
    # the control plane's version, where another is asked for.
    echo "- |"
    echo "  kind: ClusterConfiguration"
    [[ -z "${KIND_KUBERNETES_VERSION}" ]] || printf '  kubernetesVersion: "%s"\n' "${KIND_KUBERNETES_VERSION}"
    [[ -z "${etcd_image_tag}" ]] || printf '  etcd:\n    local:\n      imageTag: "%s"\n' "${etcd_image_tag}"
    [[ -z "${coredns_image_tag}" ]] || printf '  dns:\n    imageTag: "%s"\n' "${coredns_image_tag}"
  fi
  # The scheduler's /metrics on the node's address without credentials, as
  # on the local cluster (the e2e suite reads its preemption metrics), with
  # the metrics deprecated in this minor release shown
  # (scheduler_preemption_goroutines_duration_seconds). Appended to kind's
  # own extraArgs (feature-gates), which exist only with gates.
  cat <<'YAML'
kubeadmConfigPatchesJSON6902:
- group: kubeadm.k8s.io
  version: v1beta4
  kind: ClusterConfiguration
  patch: |
YAML
  args=("{name: bind-address, value: 0.0.0.0}"
    "{name: authorization-always-allow-paths, value: \"/healthz,/readyz,/livez,/metrics\"}"
    "{name: show-hidden-metrics-for-version, value: \"${previous_minor}\"}")
  if [[ -n "${KIND_FEATURE_GATES}" ]]; then
    for a in "${args[@]}"; do
      echo "    - {op: add, path: /scheduler/extraArgs/-, value: ${a}}"
    done
  else
    echo "    - op: add"
    echo "      path: /scheduler/extraArgs"
    echo "      value:"
    for a in "${args[@]}"; do
      echo "      - ${a}"
    done
  fi
} >"${config}"

log "creating the kind cluster '${KIND_NAME}' (${image}${KIND_KUBERNETES_VERSION:+, control plane ${KIND_KUBERNETES_VERSION}}, 1 control plane + ${KIND_WORKERS} workers, gates: ${KIND_FEATURE_GATES:-none}${KIND_IMAGE_ARCHIVES:+, ${#archives[@]} more image archives})"
start=$(date +%s)
if ! kind::kind create cluster --name "${KIND_NAME}" --image "${image}" --config "${config}" \
  --kubeconfig "${KIND_KUBECONFIG}" --wait "${KIND_WAIT}s" --retain; then
  kind::kind export logs "${KIND_DIR}/logs" --name "${KIND_NAME}" >/dev/null 2>&1 || true
  kind::kind delete cluster --name "${KIND_NAME}" --kubeconfig "${KIND_KUBECONFIG}" >/dev/null 2>&1 || true
  fatal "kind could not create the cluster (node logs: ${KIND_DIR}/logs); deleted what it made"
fi
kubectl=("$(line::bin)/kubectl" --kubeconfig "${KIND_KUBECONFIG}")
"${kubectl[@]}" wait --for=condition=Ready nodes --all --timeout="${KIND_WAIT}s" >/dev/null ||
  fatal "nodes not Ready within ${KIND_WAIT}s"
# CoreDNS placed and serving: the e2e suite counts what it takes of a node.
"${kubectl[@]}" --namespace kube-system wait --for=condition=Available deployments --all --timeout="${KIND_WAIT}s" >/dev/null ||
  fatal "the kube-system Deployments (CoreDNS) are not available within ${KIND_WAIT}s"
log "kind cluster up in $(($(date +%s) - start)) s"
"${kubectl[@]}" get nodes -o wide
cat <<EOF2

  export KUBECONFIG=${KIND_KUBECONFIG}
  stop: make kind-down
EOF2
