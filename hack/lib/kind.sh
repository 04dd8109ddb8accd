#!/usr/bin/env bash
# Settings of the kind cluster (`make kind-up`, `make kind-down`,
# `make kind-e2e`). Sourced after init.sh.
#
# Knobs (environment variables):
#   KIND_WORKERS         worker nodes besides the control plane (default 2)
#   KIND_FEATURE_GATES   feature gates of every component, kubelets included
#                        (default DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true;
#                        EVICTION_FAST_PATH=1 adds the eviction fast path's gates, hack/lib/gates.sh)
#   KIND_RUNTIME_CONFIG  --runtime-config of kube-apiserver (default:
#                        lifecycle.k8s.io/v1alpha1=true with EvictionRequestAPI=true)
#   KIND_NODE_IMAGE      the node image (default kube-guard/node:<kubernetes fork version>,
#                        which `make node-image` builds)
#   KIND_WAIT            how long to wait for Ready nodes (default 300s)
#   KIND_API_SERVER_PORT the port of the kube-apiserver on the host's 127.0.0.1
#                        (default 0: kind picks a free one)
#   KIND_STOP_TIMEOUT    seconds to stop a node's kubelet and containerd, or
#                        to remove a node again once thawed (default 60)
#   KIND_CGROUP_ROOT     the host's cgroup filesystem, where the teardown
#                        thaws what the cgroup freezer holds of a node
#                        (default /sys/fs/cgroup)
#   KIND_KUBERNETES_VERSION  the control plane's version kubeadm deploys: its
#                        images registry.k8s.io/kube-*:<version> must be in the
#                        node image or in KIND_IMAGE_ARCHIVES (default: the
#                        node image's own, /kind/version)
#   KIND_IMAGE_ARCHIVES  image archives (docker save or `make images` .tar
#                        files), space-separated, that every node imports
#                        into containerd at boot besides the node image's
#                        own (default none)

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
KIND_KUBERNETES_VERSION="${KIND_KUBERNETES_VERSION:-}"
KIND_IMAGE_ARCHIVES="${KIND_IMAGE_ARCHIVES:-}"

# kind::kind ARGS...: the pinned kind.
kind::kind() {
  [[ -x "${OUTPUT_BIN}/kind" ]] || "${REPO_ROOT}/hack/make-rules/tools.sh" kind
  "${OUTPUT_BIN}/kind" "$@"
}

# kind::exists: true when the cluster exists.
kind::exists() {
  kind::kind get clusters 2>/dev/null | grep -qx "${KIND_NAME}"
}

# kind::refuse_existing [WHY]: fails, saying what to do (WHY first, when
# given), when the cluster exists or docker still has node containers of it.
kind::refuse_existing() {
  local left
  left="$(kind::node_containers | awk '{ printf "%s%s (%s)", (NR > 1 ? ", " : ""), $1, $2 }')"
  if [[ -n "${left}" ]] || kind::exists; then
    fatal "the kind cluster '${KIND_NAME}' exists already${left:+ (node containers: ${left})}: ${1:+$1; }make kind-down first; it says what blocks it if docker cannot remove them"
  fi
}

# kind::node_containers: the cluster's node containers that docker still
# has, running or not: "NAME STATE", one a line.
kind::node_containers() {
  docker ps --all --filter "label=io.x-k8s.kind.cluster=${KIND_NAME}" --format '{{.Names}} {{.State}}'
}

# kind::stop_nodes: stops the kubelet and containerd in every running node,
# each for at most KIND_STOP_TIMEOUT seconds (default 60), so that no pod
# container is being started or torn down by a node's containerd while kind
# deletes the node; a node that cannot be stopped is said and left to kind.
kind::stop_nodes() {
  local name state
  while read -r name state; do
    [[ "${state}" == "running" ]] || continue
    timeout "${KIND_STOP_TIMEOUT:-60}" docker exec "${name}" systemctl stop kubelet containerd >/dev/null 2>&1 ||
      log "could not stop the kubelet and containerd in ${name} (kind deletes it anyway)"
  done < <(kind::node_containers)
}

# kind::container_id NAME: the full id of container NAME, by which the host's
# /proc/<pid>/cgroup and cgroup filesystem name it; fails when docker has no
# such container.
kind::container_id() {
  local id
  id="$(docker inspect --format '{{.Id}}' "$1" 2>/dev/null)" && [[ -n "${id}" ]] || return 1
  echo "${id}"
}

# kind::stuck_processes NAME: the processes of container NAME, as the host
# sees them, that are in uninterruptible sleep (state D): "PID WCHAN
# COMMAND", one a line (WCHAN: where the kernel holds it; __refrigerator is
# the cgroup freezer). A container with such a process cannot be killed
# until the kernel lets the process go.
kind::stuck_processes() {
  local id pid
  id="$(kind::container_id "$1")" || return 0
  for pid in /proc/[0-9]*; do
    pid="${pid#/proc/}"
    grep -qs "${id}" "/proc/${pid}/cgroup" || continue
    [[ "$(awk '{ print $3 }' "/proc/${pid}/stat" 2>/dev/null)" == "D" ]] || continue
    echo "${pid} $(cat "/proc/${pid}/wchan" 2>/dev/null || echo -) $(tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | cut -c1-80)"
  done
}

# kind::frozen_cgroups NAME: the cgroups of container NAME, its own and those
# its node made for pods and containers inside it, that the cgroup freezer
# holds: one freezer.state (cgroup v1: FROZEN or FREEZING) or cgroup.freeze
# (cgroup v2: 1) file a line, parents first, as the host's cgroup filesystem
# (KIND_CGROUP_ROOT, default /sys/fs/cgroup) has them. A task in a frozen
# cgroup sleeps uninterruptibly (in __refrigerator) and not even SIGKILL
# ends it until the cgroup is thawed: a node's runc freezes a container's
# cgroup while it updates or kills it, and when that runc or its containerd
# is stopped or killed in between, the cgroup stays frozen and docker can
# never stop the node (opencontainers/runc#2105).
kind::frozen_cgroups() {
  local id root="${KIND_CGROUP_ROOT:-/sys/fs/cgroup}" dir f
  id="$(kind::container_id "$1")" || return 0
  [[ ! -d "${root}/freezer" ]] || root="${root}/freezer"
  while read -r dir; do
    while read -r f; do
      case "${f##*/}" in
        freezer.state) if grep -qsxE 'FROZEN|FREEZING' "${f}"; then echo "${f}"; fi ;;
        cgroup.freeze) if grep -qsx 1 "${f}"; then echo "${f}"; fi ;;
      esac
    done < <(find "${dir}" \( -name freezer.state -o -name cgroup.freeze \) 2>/dev/null | awk -F/ '{ print NF, $0 }' | sort -n -s | cut -d' ' -f2-)
  done < <(find "${root}" -maxdepth 3 -type d -name "*${id}*" 2>/dev/null)
}

# kind::thaw NAME: thaws every frozen cgroup of container NAME
# (kind::frozen_cgroups), each said; returns 1 when there was none.
kind::thaw() {
  local f value thawed=1
  while read -r f; do
    [[ -n "${f}" ]] || continue
    thawed=0
    value=0
    [[ "${f##*/}" != freezer.state ]] || value=THAWED
    if ! echo "${value}" 2>/dev/null >"${f}"; then
      log "  ${1}: the cgroup freezer holds ${f%/*} and this user cannot thaw it: as root, echo ${value} > ${f}"
      continue
    fi
    log "  ${1}: thawed ${f%/*} (the cgroup freezer held it)"
  done < <(kind::frozen_cgroups "$1")
  return "${thawed}"
}

# kind::delete: deletes the cluster: stops the nodes' kubelets and
# containerds and thaws what the cgroup freezer holds in them, then kind
# deletes the nodes. A node container that docker could not remove is thawed
# again and removed once more (docker rm -f) when something in it was
# frozen. When docker still cannot remove it, it says which, in what state,
# which of its processes hold it and where, and what to run, and returns 1.
kind::delete() {
  local out name state deleted=0
  kind::stop_nodes
  while read -r name state; do
    [[ -z "${name}" ]] || kind::thaw "${name}" || true
  done < <(kind::node_containers)
  if out="$(kind::kind delete cluster --name "${KIND_NAME}" --kubeconfig "${KIND_KUBECONFIG}" 2>&1)"; then
    deleted=1
  fi
  while read -r name state; do
    [[ -n "${name}" ]] || continue
    if kind::thaw "${name}"; then
      log "docker could not remove ${name} while the cgroup freezer held part of it; removing it again, thawed"
      if timeout "${KIND_STOP_TIMEOUT:-60}" docker rm -f -v "${name}" >/dev/null 2>&1; then
        deleted=1
      fi
    fi
  done < <(kind::node_containers)
  if ((deleted)) && [[ -z "$(kind::node_containers)" ]]; then
    rm -rf "${KIND_DIR}"
    return 0
  fi
  local stuck line
  printf '%s\n' "${out}" >&2
  log "kind could not delete the cluster '${KIND_NAME}': docker still has its node containers:"
  while read -r name state; do
    log "  ${name} (${state})"
    stuck="$(kind::stuck_processes "${name}")"
    [[ -z "${stuck}" ]] || while read -r line; do
      log "    process ${line}: in uninterruptible sleep (state D), docker cannot kill the container until the kernel lets it go"
    done <<<"${stuck}"
  done < <(kind::node_containers)
  log "to remove them: run make kind-down again once those processes are gone (it thaws what the cgroup freezer holds, which it says); if they stay, restart the docker engine (or the host) and run make kind-down again"
  return 1
}

# kind::teardown: an EXIT trap that deletes the cluster (kind-down.sh) and
# exits with the status the script had: a teardown that cannot finish says
# what is left and what to run, and turns neither a green run red nor a red
# run green.
kind::teardown() {
  local status=$?
  if ! "${REPO_ROOT}/hack/make-rules/kind-down.sh"; then
    if ((status == 0)); then
      log "the tests passed; the cluster's teardown did not finish (above)"
    else
      log "the tests failed (exit ${status}); the cluster's teardown did not finish either (above)"
    fi
  fi
  exit "${status}"
}
