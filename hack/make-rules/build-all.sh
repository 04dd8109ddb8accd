#!/usr/bin/env bash
# `make build`: the patched Kubernetes binaries, the descheduler (built against
# the patched staging modules) and the pinned tools.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

"${REPO_ROOT}/hack/make-rules/build.sh"
"${REPO_ROOT}/hack/make-rules/build.sh" descheduler
"${REPO_ROOT}/hack/make-rules/tools.sh"
"${OUTPUT_BIN}/kube-apiserver" --version
"${OUTPUT_BIN}/descheduler" version
