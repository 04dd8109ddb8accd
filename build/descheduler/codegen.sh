#!/usr/bin/env bash
# The descheduler component's codegen hook (hack/make-rules/codegen.sh
# descheduler STEP... runs it; so do verify-codegen.sh and the rebase tool):
# upstream's own generators of its policy and component-config APIs, run in
# the materialised tree _output/src/descheduler.
#
# Usage: codegen.sh [all|conversions|deep-copies|defaulters]...
#   conversions  hack/update-generated-conversions.sh
#   deep-copies  hack/update-generated-deep-copies.sh
#   defaulters   hack/update-generated-defaulters.sh
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../hack/lib/init.sh"

ALL_STEPS=(conversions deep-copies defaulters)
component::load descheduler
component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run 'make materialize COMPONENT=descheduler' first"

run_steps="$(component::codegen_steps "${ALL_STEPS[@]}" -- "$@")"
mapfile -t run <<<"${run_steps}"
for s in "${run[@]}"; do
  log "descheduler codegen: hack/update-generated-${s}.sh"
  (cd "${COMPONENT_TREE}" && GOFLAGS='' bash "hack/update-generated-${s}.sh")
done
