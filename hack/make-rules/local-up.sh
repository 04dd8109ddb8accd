#!/usr/bin/env bash
# `make local-up`: a local cluster of the patched control plane on 127.0.0.1,
# with KWOK nodes, driven by `kwokctl --runtime binary` from the binaries in
# _output/bin (kwokctl links local paths, so nothing is downloaded):
#
#   etcd                     127.0.0.1:${LOCAL_ETCD_PORT}
#   kube-apiserver           https://127.0.0.1:${LOCAL_APISERVER_PORT}, Priority admission
#                            on, --feature-gates=${LOCAL_FEATURE_GATES}
#   kube-controller-manager  all default controllers (disruption, garbage collector,
#                            service accounts, node lifecycle, ...), same gates
#   kube-scheduler           patched, same gates; /metrics and /healthz readable
#                            without credentials (--authorization-always-allow-paths)
#   kwok-controller          ${LOCAL_NODES} fake nodes kwok-node-0..N-1, stages from
#                            build/local/kwok-stages.yaml
#
# Binaries that are missing are built first. The knobs are listed in
# hack/lib/local.sh. Everything is kept under _output/local; `make local-down`
# stops exactly these processes.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/local.sh"

[[ "${LOCAL_NODES}" =~ ^[0-9]+$ && "${LOCAL_NODES}" -ge 1 ]] ||
  fatal "LOCAL_NODES must be a positive number, not '${LOCAL_NODES}'"

# 1. Not already running.
running="$(local::running_pids)"
if [[ -n "${running}" ]]; then
  fatal "the local cluster is already running ($(echo "${running}" | awk '{printf "%s%s pid %s", sep, $2, $1; sep=", "}')); use it with: ${KUBE_BIN}/kubectl --kubeconfig ${LOCAL_KUBECONFIG} get nodes, or stop it with 'make local-down'"
fi
if [[ -e "${LOCAL_DIR}" ]]; then
  log "removing the data of a local cluster that is no longer running (${LOCAL_DIR})"
  rm -rf "${LOCAL_DIR}"
fi

# 2. Binaries: build what is missing.
missing_kube=() missing_tools=()
for b in "${LOCAL_KUBE_BINARIES[@]}"; do
  [[ -x "${KUBE_BIN}/${b}" ]] || missing_kube+=("${b}")
done
for b in "${LOCAL_TOOL_BINARIES[@]}"; do
  [[ -x "${OUTPUT_BIN}/${b}" ]] || missing_tools+=("${b}")
done
if [[ ${#missing_kube[@]} -gt 0 ]]; then
  log "building missing binaries: ${missing_kube[*]}"
  "${REPO_ROOT}/hack/make-rules/build.sh" "${missing_kube[@]}" ||
    fatal "could not build ${missing_kube[*]} (see above); 'make' builds everything"
fi
if [[ ${#missing_tools[@]} -gt 0 ]]; then
  log "building missing tools: ${missing_tools[*]}"
  tools=()
  for b in "${missing_tools[@]}"; do
    case "${b}" in etcd) tools+=(etcd) ;; kwok | kwokctl) tools+=(kwok) ;; esac
  done
  mapfile -t tools < <(printf '%s\n' "${tools[@]}" | sort -u)
  "${REPO_ROOT}/hack/make-rules/tools.sh" "${tools[@]}" ||
    fatal "could not build ${missing_tools[*]} (see above); 'make tools' builds them"
fi
for b in "${LOCAL_KUBE_BINARIES[@]}"; do
  [[ -x "${KUBE_BIN}/${b}" ]] || fatal "${KUBE_BIN}/${b} is missing or not executable (run 'make${LINE:+ LINE=${LINE}}')"
done
for b in "${LOCAL_TOOL_BINARIES[@]}"; do
  [[ -x "${OUTPUT_BIN}/${b}" ]] || fatal "${OUTPUT_BIN}/${b} is missing or not executable (run 'make')"
done

# 3. Ports.
for var in LOCAL_APISERVER_PORT LOCAL_ETCD_PORT LOCAL_ETCD_PEER_PORT LOCAL_CONTROLLER_MANAGER_PORT \
  LOCAL_SCHEDULER_PORT LOCAL_KWOK_PORT; do
  port="${!var}"
  [[ "${port}" =~ ^[0-9]+$ ]] || fatal "${var} must be a port number, not '${port}'"
  if port_busy "${port}"; then
    fatal "port ${port} on 127.0.0.1 (${var}) is in use by another process; free it or choose another, e.g. ${var}=$((port + 1000)) make local-up"
  fi
done

# 4. Start.
line="$(line::selected)"
previous_minor="${line%%.*}.$((${line#*.} - 1))"
start="$(date +%s)"
mkdir -p "${LOCAL_DIR}"
log "starting the local cluster '${LOCAL_NAME}' in ${LOCAL_DIR} (gates: ${LOCAL_FEATURE_GATES:-none}, ${LOCAL_NODES} nodes)"
etcd_peer="http://127.0.0.1:${LOCAL_ETCD_PEER_PORT}"
etcd_client="http://127.0.0.1:${LOCAL_ETCD_PORT}"
create_args=(
  --runtime binary
  --kubeconfig "${LOCAL_KUBECONFIG}"
  --kube-apiserver-binary "${KUBE_BIN}/kube-apiserver"
  --kube-controller-manager-binary "${KUBE_BIN}/kube-controller-manager"
  --kube-scheduler-binary "${KUBE_BIN}/kube-scheduler"
  --etcd-binary "${OUTPUT_BIN}/etcd"
  --kwok-controller-binary "${OUTPUT_BIN}/kwok"
  --kube-apiserver-port "${LOCAL_APISERVER_PORT}"
  --etcd-port "${LOCAL_ETCD_PORT}"
  --kube-controller-manager-port "${LOCAL_CONTROLLER_MANAGER_PORT}"
  --kube-scheduler-port "${LOCAL_SCHEDULER_PORT}"
  --controller-port "${LOCAL_KWOK_PORT}"
  --timeout "${LOCAL_WAIT}s"
)
if [[ -n "${LOCAL_FEATURE_GATES}" ]]; then
  create_args+=(--kube-feature-gates "${LOCAL_FEATURE_GATES}")
fi
if [[ -n "${LOCAL_RUNTIME_CONFIG}" ]]; then
  create_args+=(--kube-runtime-config "${LOCAL_RUNTIME_CONFIG}")
fi
if [[ -n "${LOCAL_AUDIT_POLICY}" ]]; then
  [[ -f "${LOCAL_AUDIT_POLICY}" ]] || fatal "LOCAL_AUDIT_POLICY=${LOCAL_AUDIT_POLICY} is not a file"
  create_args+=(--kube-audit-policy "$(realpath "${LOCAL_AUDIT_POLICY}")")
fi
# kwokctl binds to 0.0.0.0; these extra flags come after its own (the later
# flag wins) and keep everything on 127.0.0.1. They go in a config file:
# The pinned kwokctl's --extra-args panics when a component is named twice.
kwokctl_config="${LOCAL_DIR}/kwokctl.yaml"
cat >"${kwokctl_config}" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: etcd
  extraArgs:
  - {key: listen-client-urls, value: "${etcd_client}"}
  - {key: advertise-client-urls, value: "${etcd_client}"}
  - {key: listen-peer-urls, value: "${etcd_peer}"}
  - {key: initial-advertise-peer-urls, value: "${etcd_peer}"}
  - {key: initial-cluster, value: "node0=${etcd_peer}"}
- name: kube-apiserver
  extraArgs:
  - {key: bind-address, value: 127.0.0.1}
  - {key: enable-admission-plugins, value: Priority}
- name: kube-controller-manager
  extraArgs:
  - {key: bind-address, value: 127.0.0.1}
- name: kube-scheduler
  extraArgs:
  - {key: bind-address, value: 127.0.0.1}
  # scheduler_preemption_goroutines_duration_seconds is deprecated since Kubernetes 1.37 and hidden without this
  # (the previous minor of the line: the only value the flag takes).
  - {key: show-hidden-metrics-for-version, value: "${previous_minor}"}
- name: kwok-controller
  extraArgs:
  - {key: server-address, value: "127.0.0.1:${LOCAL_KWOK_PORT}"}
EOF
if ! local::kwokctl --config "${kwokctl_config}" --config "${LOCAL_STAGES}" create cluster "${create_args[@]}" >"${LOCAL_DIR}/kwokctl.log" 2>&1; then
  tail -n 20 "${LOCAL_DIR}/kwokctl.log" >&2 || true
  local::log_tails 5
  local::stop
  fatal "kwokctl could not start the cluster (log: ${LOCAL_DIR}/kwokctl.log, component logs were in ${LOCAL_LOGS_DIR}); stopped what had started"
fi

cat >"${LOCAL_ENV_FILE}" <<EOF
# Written by hack/make-rules/local-up.sh: the running local cluster.
LOCAL_KUBECONFIG=${LOCAL_KUBECONFIG}
LOCAL_FEATURE_GATES=${LOCAL_FEATURE_GATES}
LOCAL_RUNTIME_CONFIG=${LOCAL_RUNTIME_CONFIG}
LOCAL_NODES=${LOCAL_NODES}
LOCAL_AUDIT_POLICY=${LOCAL_AUDIT_POLICY}
LOCAL_APISERVER_URL=https://127.0.0.1:${LOCAL_APISERVER_PORT}
LOCAL_SCHEDULER_URL=https://127.0.0.1:${LOCAL_SCHEDULER_PORT}
LOCAL_CONTROLLER_MANAGER_URL=https://127.0.0.1:${LOCAL_CONTROLLER_MANAGER_PORT}
EOF

# 5. Nodes: distinct labels per node (kube-guard.io/node-index, a zone of two).
nodes_yaml="${LOCAL_DIR}/nodes.yaml"
: >"${nodes_yaml}"
for ((i = 0; i < LOCAL_NODES; i++)); do
  cat >>"${nodes_yaml}" <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-${i}
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: kwok-node-${i}
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kube-guard.io/node-index: "${i}"
    topology.kubernetes.io/zone: zone-$((i % 2))
status:
  allocatable:
    cpu: "${LOCAL_NODE_CPU}"
    memory: ${LOCAL_NODE_MEMORY}
    pods: "${LOCAL_NODE_PODS}"
  capacity:
    cpu: "${LOCAL_NODE_CPU}"
    memory: ${LOCAL_NODE_MEMORY}
    pods: "${LOCAL_NODE_PODS}"
EOF
done

fail() {
  log "the cluster did not become healthy: $*"
  local::log_tails 5
  fatal "the cluster is left running for inspection (logs: ${LOCAL_LOGS_DIR}); stop it with 'make local-down'"
}

# wait_for WHAT CMD...: retries CMD every second until it succeeds or LOCAL_WAIT passes.
wait_for() {
  local what="$1"
  shift
  local deadline=$(($(date +%s) + LOCAL_WAIT))
  until "$@" >/dev/null 2>&1; do
    [[ $(date +%s) -lt ${deadline} ]] || fail "${what} (after ${LOCAL_WAIT}s)"
    sleep 1
  done
}

wait_for "kube-apiserver /readyz" local::kubectl get --raw /readyz
local::kubectl apply -f "${nodes_yaml}" >/dev/null || fail "creating the nodes"
wait_for "kube-scheduler /healthz" curl -fsk "https://127.0.0.1:${LOCAL_SCHEDULER_PORT}/healthz"
wait_for "kube-controller-manager /healthz" curl -fsk "https://127.0.0.1:${LOCAL_CONTROLLER_MANAGER_PORT}/healthz"
wait_for "${LOCAL_NODES} Ready nodes" local::kubectl wait --for=condition=Ready node -l type=kwok --timeout=5s
wait_for "the default ServiceAccount" local::kubectl get serviceaccount default -n default
wait_for "PriorityClass system-cluster-critical" local::kubectl get priorityclass system-cluster-critical
if [[ ",${LOCAL_RUNTIME_CONFIG}," == *,lifecycle.k8s.io/v1alpha1=true,* ]]; then
  wait_for "the EvictionRequest API (lifecycle.k8s.io/v1alpha1)" local::kubectl get --raw /apis/lifecycle.k8s.io/v1alpha1
fi

log "local cluster is up in $(($(date +%s) - start)) s"
cat <<EOF

The local cluster '${LOCAL_NAME}' is running on 127.0.0.1 (${LOCAL_NODES} KWOK nodes, gates: ${LOCAL_FEATURE_GATES:-none}, runtime-config: ${LOCAL_RUNTIME_CONFIG:-none}).

  export KUBECONFIG=${LOCAL_KUBECONFIG}
  ${KUBE_BIN#"${REPO_ROOT}/"}/kubectl get nodes

  kube-apiserver  https://127.0.0.1:${LOCAL_APISERVER_PORT}
  kube-scheduler  https://127.0.0.1:${LOCAL_SCHEDULER_PORT}/metrics (no credentials needed)
  logs            ${LOCAL_LOGS_DIR}/
  stop            make local-down
EOF
