#!/usr/bin/env bash
# make kind-down: deletes the kind cluster of `make kind-up` (the docker
# engine keeps running).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/kind.sh"

if ! docker info >/dev/null 2>&1; then
  log "no docker engine: no kind cluster"
  exit 0
fi
if ! kind::exists; then
  log "no kind cluster '${KIND_NAME}'"
  exit 0
fi
kind::kind delete cluster --name "${KIND_NAME}" --kubeconfig "${KIND_KUBECONFIG}"
rm -rf "${KIND_DIR}"
log "kind cluster '${KIND_NAME}' deleted"
