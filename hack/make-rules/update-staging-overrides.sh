#!/usr/bin/env bash
# This repo's own Go module (test/integration, test/e2e, tools) builds against
# the *patched* Kubernetes: staging-overrides/k8s.io/<module> are committed
# symlinks into the materialised tree (_output/src/kubernetes), and go.mod
# replaces every staging module, and k8s.io/kubernetes itself, with them.
# This script (re)writes both from the tree's go.work; hack/make-rules/verify.sh
# runs it and fails when the committed result differs.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

component::load kubernetes
component::is_materialised || "${REPO_ROOT}/hack/make-rules/materialize.sh" kubernetes

overrides="${REPO_ROOT}/staging-overrides/k8s.io"
rel_tree="../../${COMPONENT_TREE#"${REPO_ROOT}/"}"
mapfile -t names < <(component::staging_modules "${COMPONENT_TREE}/go.work")

rm -rf "${overrides}"
mkdir -p "${overrides}"
ln -s "${rel_tree}" "${overrides}/kubernetes"
args=(-replace "k8s.io/kubernetes=./staging-overrides/k8s.io/kubernetes")
for n in "${names[@]}"; do
  ln -s "${rel_tree}/staging/src/k8s.io/${n}" "${overrides}/${n}"
  args+=(-replace "k8s.io/${n}=./staging-overrides/k8s.io/${n}")
done
# Drop replacements of modules the tree no longer has, then set the current ones.
while read -r old; do
  go mod edit -dropreplace "${old}" "${REPO_ROOT}/go.mod"
done < <(cd "${REPO_ROOT}" && go mod edit -json | jq -r '.Replace[]? | select(.New.Path | startswith("./staging-overrides/")) | .Old.Path')
(cd "${REPO_ROOT}" && go mod edit "${args[@]}")
log "staging-overrides: k8s.io/kubernetes and ${#names[@]} staging modules -> ${COMPONENT_TREE#"${REPO_ROOT}/"}"
