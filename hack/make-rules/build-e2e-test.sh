#!/usr/bin/env bash
# Builds upstream's e2e test binary from the patched tree into
# _output/bin/e2e.test, as upstream's `make WHAT=test/e2e/e2e.test` does
# (`go test -c`, version-stamped like the other binaries), for
# `make kind-e2e`. A re-run with nothing changed is a no-op (Go's caches).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/version.sh"
source "${REPO_ROOT}/hack/lib/build.sh"

[[ -n "${SKIP_APPLY:-}" ]] || "${REPO_ROOT}/hack/make-rules/apply.sh" kubernetes
component::load kubernetes
version::vars
read -ra go_env <<<"$(component::setting kubernetes GO_BUILD_ENV)"
ldflags="$(build::expand "$(component::setting kubernetes GO_LDFLAGS)")"
log "building e2e.test ${FORK_GIT_VERSION} (${FORK_GIT_COMMIT:0:12})"
mkdir -p "$(line::bin)"
(
  cd "${COMPONENT_TREE}"
  env CGO_ENABLED=0 "${go_env[@]}" go test -c -trimpath -ldflags "${ldflags}" -o "$(line::bin)/e2e.test" ./test/e2e
)
log "  $(line::bin)/e2e.test"
