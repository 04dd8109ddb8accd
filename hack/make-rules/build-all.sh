#!/usr/bin/env bash
# `make build`: every component's patched binaries (build.sh; a component
# built on another's staging modules after it), the pinned tools, and the
# pristine upstream binaries the skew and downgrade tests run
# (_output/bin/pristine, build-pristine.sh).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

"${REPO_ROOT}/hack/make-rules/build.sh"
"${REPO_ROOT}/hack/make-rules/tools.sh"
"${REPO_ROOT}/hack/make-rules/build-pristine.sh"
