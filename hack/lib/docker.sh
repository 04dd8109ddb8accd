#!/usr/bin/env bash
# A docker engine for the kind node image and cluster (`make node-image`,
# `make kind-up`). Sourced after init.sh.
#
# docker::ensure: uses the running engine, or starts one: Debian's docker.io
# is installed if dockerd is missing, and dockerd runs in the background
# (log and pid file in _output/docker; it keeps running). On a host whose
# capability bounding set lacks CAP_SYS_RESOURCE, privileged containers (kind
# nodes) fail in runc ("unable to apply caps"); there the engine gets
# build/docker/runc-drop-sys-resource as its default runtime, which removes
# that capability from each container's spec. A running engine without it on
# such a host is an error that says what to do.

DOCKER_DIR="${OUTPUT_DIR}/docker"
DOCKER_SHIM_NAME="kube-guard"
DOCKER_SHIM="/usr/local/lib/kube-guard/runc-drop-sys-resource"

# docker::host_lacks_sys_resource: true when CAP_SYS_RESOURCE (bit 24) is not
# in this process's capability bounding set.
docker::host_lacks_sys_resource() {
  local bnd
  bnd="$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)"
  [[ -n "${bnd}" ]] && (( ((16#${bnd} >> 24) & 1) == 0 ))
}

docker::ensure() {
  local need_shim=false
  docker::host_lacks_sys_resource && need_shim=true
  if docker info >/dev/null 2>&1; then
    if [[ "${need_shim}" == true ]] && [[ "$(docker info --format '{{.DefaultRuntime}}')" != "${DOCKER_SHIM_NAME}" ]]; then
      fatal "the running docker engine cannot start privileged containers here: this host's capability bounding set lacks CAP_SYS_RESOURCE. Stop it (the scripts then start one with a runtime that drops that capability), or restart it with --add-runtime ${DOCKER_SHIM_NAME}=${DOCKER_SHIM} --default-runtime ${DOCKER_SHIM_NAME} (docs/kind.md)"
    fi
    return 0
  fi
  if ! command -v dockerd >/dev/null; then
    command -v apt-get >/dev/null || fatal "no docker engine is running and dockerd is not installed: install a docker engine"
    log "installing Debian's docker.io (no docker engine here)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io jq >/dev/null ||
      fatal "apt-get install docker.io failed"
  fi
  command -v jq >/dev/null || fatal "jq is needed (apt-get install jq)"
  mkdir -p "${DOCKER_DIR}"
  local args=(--host unix:///var/run/docker.sock)
  if [[ "${need_shim}" == true ]]; then
    install -D -m 0755 "${REPO_ROOT}/build/docker/runc-drop-sys-resource" "${DOCKER_SHIM}"
    args+=(--add-runtime "${DOCKER_SHIM_NAME}=${DOCKER_SHIM}" --default-runtime "${DOCKER_SHIM_NAME}")
    log "this host's capability bounding set lacks CAP_SYS_RESOURCE: dockerd runs privileged containers through ${DOCKER_SHIM}"
  fi
  # A dockerd that is still stopping, or the pid file of one that crashed.
  local pidfile=/var/run/docker.pid deadline=$((SECONDS + 30))
  while [[ -s "${pidfile}" ]] && kill -0 "$(cat "${pidfile}")" 2>/dev/null; do
    [[ ${SECONDS} -lt ${deadline} ]] ||
      fatal "dockerd (pid $(cat "${pidfile}")) runs but does not answer: stop it, or fix it (docker info)"
    sleep 1
  done
  rm -f "${pidfile}"
  log "starting dockerd (log: ${DOCKER_DIR}/dockerd.log)"
  # setsid: the engine outlives this script and its process group.
  setsid dockerd "${args[@]}" >"${DOCKER_DIR}/dockerd.log" 2>&1 </dev/null &
  echo $! >"${DOCKER_DIR}/dockerd.pid"
  deadline=$((SECONDS + 60))
  until docker info >/dev/null 2>&1; do
    if ! kill -0 "$(cat "${DOCKER_DIR}/dockerd.pid")" 2>/dev/null; then
      tail -n 20 "${DOCKER_DIR}/dockerd.log" >&2 || true
      fatal "dockerd exited (log: ${DOCKER_DIR}/dockerd.log)"
    fi
    [[ ${SECONDS} -lt ${deadline} ]] || fatal "dockerd did not answer within 60 s (log: ${DOCKER_DIR}/dockerd.log)"
    sleep 1
  done
  log "docker engine $(docker info --format '{{.ServerVersion}}') is up"
}
