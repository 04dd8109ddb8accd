#!/usr/bin/env bash
# make kind-down: deletes the kind cluster of `make kind-up` (the docker
# engine keeps running). The nodes' kubelets and containerds are stopped
# first; a node container that docker cannot remove is named, with its
# state and the processes that hold it, and what to run (exit 1). Run again,
# it removes what a failed teardown left.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/kind.sh"

if ! docker info >/dev/null 2>&1; then
  log "no docker engine: no kind cluster"
  exit 0
fi
if ! kind::exists && [[ -z "$(kind::node_containers)" ]]; then
  log "no kind cluster '${KIND_NAME}'"
  exit 0
fi
kind::delete || exit 1
log "kind cluster '${KIND_NAME}' deleted"
