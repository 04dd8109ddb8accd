#!/usr/bin/env bash
# Runs a component's generators in its materialised tree: the component's
# codegen hook, build/<component>/codegen.sh (upstream's own generators, run
# offline; each hook's header lists its steps). A component without a hook has
# no generated code.
#
# Usage: codegen.sh COMPONENT [STEP...]   (default steps: all)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

component::load "${1:?usage: codegen.sh COMPONENT [STEP...]}"
shift
hook="${REPO_ROOT}/build/${COMPONENT_NAME}/codegen.sh"
if [[ ! -f "${hook}" ]]; then
  log "${COMPONENT_NAME}: no codegen hook (build/${COMPONENT_NAME}/codegen.sh): nothing to generate"
  exit 0
fi
exec bash "${hook}" "$@"
