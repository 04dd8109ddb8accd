#!/usr/bin/env bash
# `make update`: rewrites every derived file of this repository from its
# source, each with its own script under update/ (the matching check is
# verify/<name>.sh):
#   staging-overrides  go.mod and staging-overrides/ from the patched tree
#   staging-replaces   build/<c>/overlay/go.{mod,sum} of components built on
#                      another's staging modules
#   docs               README's generated blocks (the pins)
# Generated code inside the trees is not here: it belongs to the patches
# (make codegen, then commit it into the patch).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

for u in staging-overrides staging-replaces docs upstream-examples; do
  log "update ${u}"
  "$(dirname "${BASH_SOURCE[0]}")/${u}.sh"
done
