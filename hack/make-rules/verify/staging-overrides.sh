#!/usr/bin/env bash
# go.mod and staging-overrides/ are what update/staging-overrides.sh writes
# (run on a copy of the repository; the checkout is never changed).
# Applies when a component sets REPO_MODULE_REPLACES=true.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

root="$(verify::scratch_root)"
trap 'rm -rf "${root}"' EXIT
TARGET_ROOT="${root}" "${REPO_ROOT}/hack/make-rules/update/staging-overrides.sh"
verify::compare "${root}" hack/make-rules/update/staging-overrides.sh go.mod go.sum staging-overrides
log "verify staging-overrides: go.mod and staging-overrides/ up to date"
