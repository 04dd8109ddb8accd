#!/usr/bin/env bash
# Settings of the kind cluster (`make kind-up`, `make kind-down`,
# `make kind-e2e`). Sourced after init.sh.
#
# Knobs (environment variables):
#   KIND_WORKERS         worker nodes besides the control plane (default 2)
#   KIND_FEATURE_GATES   feature gates of every component, kubelets included
#                        (default DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true,EvictionWritesBudgetsToStorage=true)
#   KIND_RUNTIME_CONFIG  --runtime-config of kube-apiserver (default:
#                        lifecycle.k8s.io/v1alpha1=true with EvictionRequestAPI=true)
#   KIND_NODE_IMAGE      the node image (default kube-guard/node:<kubernetes fork version>,
#                        which `make node-image` builds)
#   KIND_WAIT            how long to wait for Ready nodes (default 300s)
#   KIND_API_SERVER_PORT the port of the kube-apiserver on the host's 127.0.0.1
#                        (default 0: kind picks a free one)

# shellcheck disable=SC2034
source "${REPO_ROOT}/hack/lib/gates.sh"

KIND_DIR="${OUTPUT_DIR}/kind"
KIND_NAME="kube-guard"
KIND_KUBECONFIG="${KIND_DIR}/kubeconfig"
KIND_WORKERS="${KIND_WORKERS:-2}"
KIND_FEATURE_GATES="${KIND_FEATURE_GATES-${GATES_DEFAULT}}"
KIND_RUNTIME_CONFIG="${KIND_RUNTIME_CONFIG-$(gates::runtime_config "${KIND_FEATURE_GATES}")}"
KIND_WAIT="${KIND_WAIT:-300}"
KIND_API_SERVER_PORT="${KIND_API_SERVER_PORT:-0}"

# kind::kind ARGS...: the pinned kind.
kind::kind() {
  [[ -x "${OUTPUT_BIN}/kind" ]] || "${REPO_ROOT}/hack/make-rules/tools.sh" kind
  "${OUTPUT_BIN}/kind" "$@"
}

# kind::exists: true when the cluster exists.
kind::exists() {
  kind::kind get clusters 2>/dev/null | grep -qx "${KIND_NAME}"
}
