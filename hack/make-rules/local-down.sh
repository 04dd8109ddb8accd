#!/usr/bin/env bash
# `make local-down`: stops the local cluster of `make local-up` and removes its
# data. Only the processes named in the cluster's pid files
# (_output/local/kwok/clusters/kube-guard/pids/*.pid) are signalled: SIGTERM,
# then SIGKILL for any still running 20 s later. Then _output/local, the only
# place the cluster wrote to, is removed. Running it with no cluster is fine.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/local.sh"

if [[ ! -e "${LOCAL_DIR}" ]]; then
  log "no local cluster (${LOCAL_DIR} does not exist)"
  exit 0
fi
local::stop
[[ -z "$(local::running_pids)" ]] || fatal "some processes of the local cluster could not be stopped: $(local::running_pids | tr '\n' ' ')"
if [[ -n "${KEEP_LOGS:-}" && -d "${LOCAL_LOGS_DIR}" ]]; then
  mkdir -p "${OUTPUT_DIR}/local-logs"
  cp -r "${LOCAL_LOGS_DIR}/." "${OUTPUT_DIR}/local-logs/"
  log "kept the logs in ${OUTPUT_DIR}/local-logs"
fi
rm -rf "${LOCAL_DIR}"
log "local cluster stopped, ${LOCAL_DIR} removed"
