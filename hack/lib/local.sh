#!/usr/bin/env bash
# Shared settings of the local cluster (`make local-up`, `make local-down`,
# `make e2e`). Sourced after init.sh.
#
# Knobs (environment variables):
#   LOCAL_NODES            number of KWOK nodes (default 4)
#   LOCAL_FEATURE_GATES    --feature-gates of kube-apiserver, kube-controller-manager
#                          and kube-scheduler
#                          (default DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true;
#                          EVICTION_FAST_PATH=1 adds the eviction fast path's gates, hack/lib/gates.sh)
#   LOCAL_RUNTIME_CONFIG   --runtime-config of kube-apiserver (default:
#                          lifecycle.k8s.io/v1alpha1=true when EvictionRequestAPI=true
#                          is among the gates: KEP-4563's API group is off by
#                          default, and the gate alone serves nothing)
#   LOCAL_NODE_CPU         allocatable CPU of each node (default 4)
#   LOCAL_NODE_MEMORY      allocatable memory of each node (default 16Gi)
#   LOCAL_NODE_PODS        allocatable pods of each node (default 110)
#   LOCAL_APISERVER_PORT   kube-apiserver secure port (default 16443); the other
#   LOCAL_ETCD_PORT        components' ports (defaults 12379, 12380, 10357,
#   LOCAL_ETCD_PEER_PORT   10359, 10347) are settable the same way
#   LOCAL_CONTROLLER_MANAGER_PORT, LOCAL_SCHEDULER_PORT, LOCAL_KWOK_PORT
#   LOCAL_WAIT             how long to wait for a healthy cluster (default 180s)
#   LOCAL_AUDIT_POLICY     an audit policy file: kube-apiserver writes its audit log
#                          to ${LOCAL_LOGS_DIR}/audit.log (default: none, no audit log)
#
# Everything the cluster writes (kwokctl's cluster directory with PKI, etcd
# data, logs and pid files; the kubeconfig) stays under _output/local.

# The LOCAL_* variables are for the scripts that source this file.
# shellcheck disable=SC2034
source "${REPO_ROOT}/hack/lib/gates.sh"

LOCAL_DIR="${OUTPUT_DIR}/local"
LOCAL_NAME="kube-guard"
# kwokctl keeps its clusters and caches under $KWOK_WORKDIR (default ~/.kwok).
LOCAL_KWOK_WORKDIR="${LOCAL_DIR}/kwok"
LOCAL_CLUSTER_DIR="${LOCAL_KWOK_WORKDIR}/clusters/${LOCAL_NAME}"
LOCAL_PIDS_DIR="${LOCAL_CLUSTER_DIR}/pids"
LOCAL_LOGS_DIR="${LOCAL_CLUSTER_DIR}/logs"
LOCAL_KUBECONFIG="${LOCAL_DIR}/kubeconfig"
# Written by local-up.sh: the settings the running cluster was started with.
LOCAL_ENV_FILE="${LOCAL_DIR}/cluster.env"
LOCAL_STAGES="${REPO_ROOT}/build/local/kwok-stages.yaml"

LOCAL_NODES="${LOCAL_NODES:-4}"
LOCAL_FEATURE_GATES="${LOCAL_FEATURE_GATES-${GATES_DEFAULT}}"
LOCAL_RUNTIME_CONFIG="${LOCAL_RUNTIME_CONFIG-$(gates::runtime_config "${LOCAL_FEATURE_GATES}")}"
LOCAL_NODE_CPU="${LOCAL_NODE_CPU:-4}"
LOCAL_NODE_MEMORY="${LOCAL_NODE_MEMORY:-16Gi}"
LOCAL_NODE_PODS="${LOCAL_NODE_PODS:-110}"
LOCAL_APISERVER_PORT="${LOCAL_APISERVER_PORT:-16443}"
LOCAL_ETCD_PORT="${LOCAL_ETCD_PORT:-12379}"
LOCAL_ETCD_PEER_PORT="${LOCAL_ETCD_PEER_PORT:-12380}"
LOCAL_CONTROLLER_MANAGER_PORT="${LOCAL_CONTROLLER_MANAGER_PORT:-10357}"
LOCAL_SCHEDULER_PORT="${LOCAL_SCHEDULER_PORT:-10359}"
LOCAL_KWOK_PORT="${LOCAL_KWOK_PORT:-10347}"
LOCAL_WAIT="${LOCAL_WAIT:-180}"
LOCAL_AUDIT_POLICY="${LOCAL_AUDIT_POLICY:-}"

# The binaries the cluster runs, and the build script that makes each: the
# control plane of the release line LINE (default: the newest) from KUBE_BIN,
# the tools from _output/bin.
KUBE_BIN="$(line::bin)"
LOCAL_KUBE_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
LOCAL_TOOL_BINARIES=(etcd kwok kwokctl)

# local::kwokctl ARGS...: kwokctl with its work directory under _output/local.
# HOME points there too: kwokctl and kwok-controller keep a client-go HTTP
# cache in ~/.kube/cache otherwise. The nodes report the pinned release.
local::kwokctl() {
  mkdir -p "${LOCAL_DIR}/home"
  HOME="${LOCAL_DIR}/home" KWOK_WORKDIR="${LOCAL_KWOK_WORKDIR}" \
    KWOK_KUBE_VERSION="$(component::setting kubernetes UPSTREAM_VERSION)" \
    "${OUTPUT_BIN}/kwokctl" --name "${LOCAL_NAME}" "$@"
}

# local::kubectl ARGS...: the project's kubectl against the local cluster.
local::kubectl() {
  "${KUBE_BIN}/kubectl" --kubeconfig "${LOCAL_KUBECONFIG}" --cache-dir "${LOCAL_DIR}/kube-cache" "$@"
}

# The components in the order local::stop stops them (etcd last, so that the
# apiserver can shut down cleanly).
LOCAL_STOP_ORDER=(kwok-controller kube-scheduler kube-controller-manager kube-apiserver etcd)

# local::alive PID: the process runs (not a zombie) and is one of ours: its
# command line names the cluster's directory, so a recycled pid is never signalled.
local::alive() {
  local pid="$1" state
  [[ -r "/proc/${pid}/stat" ]] || return 1
  state="$(awk '{print $3}' "/proc/${pid}/stat" 2>/dev/null)" || return 1
  [[ "${state}" != "Z" ]] || return 1
  tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qF "${LOCAL_CLUSTER_DIR}/"
}

# local::log_tails LINES [NAME...]: the last LINES lines of the named
# components' logs (default: every log), to stderr.
local::log_tails() {
  local lines="$1" f
  shift
  local -a files=()
  if (($#)); then
    for f in "$@"; do files+=("${LOCAL_LOGS_DIR}/${f}.log"); done
  else
    files=("${LOCAL_LOGS_DIR}"/*.log)
  fi
  for f in "${files[@]}"; do
    [[ -f "${f}" ]] || continue
    printf -- '--- %s (last lines) ---\n' "${f}" >&2
    tail -n "${lines}" "${f}" >&2
  done
}

# local::report: after a failure, which of the cluster's components exited
# (with the end of their logs) and the free space where etcd writes: a
# component that died explains every timeout that follows it.
local::report() {
  local name f pid
  local -a exited=()
  for name in "${LOCAL_STOP_ORDER[@]}"; do
    f="${LOCAL_PIDS_DIR}/${name}.pid"
    [[ -f "${f}" ]] || continue
    pid="$(<"${f}")"
    if [[ "${pid}" =~ ^[0-9]+$ ]] && local::alive "${pid}"; then
      log "${name} (pid ${pid}) is running"
    else
      log "${name} (pid ${pid}) has exited"
      exited+=("${name}")
    fi
  done
  log "$(free_gib "${LOCAL_CLUSTER_DIR}") GiB free on the file system of ${LOCAL_CLUSTER_DIR}"
  ((${#exited[@]} == 0)) || local::log_tails 20 "${exited[@]}"
}

# local::running_pids: "PID NAME" for each pid file whose process is alive, one a line.
local::running_pids() {
  local f pid
  [[ -d "${LOCAL_PIDS_DIR}" ]] || return 0
  for f in "${LOCAL_PIDS_DIR}"/*.pid; do
    [[ -f "${f}" ]] || continue
    pid="$(<"${f}")"
    [[ "${pid}" =~ ^[0-9]+$ ]] || continue
    if local::alive "${pid}"; then
      printf '%s %s\n' "${pid}" "$(basename "${f}" .pid)"
    fi
  done
}

# local::wait_gone PID SECONDS: waits until PID has exited.
local::wait_gone() {
  local pid="$1" i
  for ((i = 0; i < $2 * 10; i++)); do
    local::alive "${pid}" || return 0
    sleep 0.1
  done
  ! local::alive "${pid}"
}

# local::stop: stops the processes of the pid files, and only those, one
# component after the other: SIGTERM, SIGKILL if still running 20 s later.
local::stop() {
  local name f pid
  for name in "${LOCAL_STOP_ORDER[@]}"; do
    f="${LOCAL_PIDS_DIR}/${name}.pid"
    [[ -f "${f}" ]] || continue
    pid="$(<"${f}")"
    [[ "${pid}" =~ ^[0-9]+$ ]] && local::alive "${pid}" || continue
    log "stopping ${name} (pid ${pid})"
    kill -TERM "${pid}" 2>/dev/null || true
    if ! local::wait_gone "${pid}" 20; then
      log "killing ${name} (pid ${pid}): still running 20 s after SIGTERM"
      kill -KILL "${pid}" 2>/dev/null || true
      local::wait_gone "${pid}" 10 || true
    fi
  done
}
