#!/usr/bin/env bash
# `make build`: the patched Kubernetes binaries, the descheduler (built against
# the patched staging modules), the pinned tools, and pristine upstream's
# kube-apiserver (_output/bin/pristine, for the downgrade and skew tests).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

"${REPO_ROOT}/hack/make-rules/build.sh"
"${REPO_ROOT}/hack/make-rules/build.sh" descheduler
"${REPO_ROOT}/hack/make-rules/tools.sh"
"${REPO_ROOT}/hack/make-rules/build-pristine.sh"
"${OUTPUT_BIN}/kube-apiserver" --version
"${OUTPUT_BIN}/descheduler" version
