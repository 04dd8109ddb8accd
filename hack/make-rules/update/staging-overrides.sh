#!/usr/bin/env bash
# This repo's own Go module (test/integration, test/e2e, tools) builds against
# the *patched* Kubernetes: staging-overrides/k8s.io/<module> are committed
# symlinks into the materialised tree (_output/src/kubernetes), and go.mod
# replaces every staging module, and k8s.io/kubernetes itself, with them.
# go.mod requires those of them it uses at the pinned versions.
# This script (re)writes both from the tree's go.work, in TARGET_ROOT
# (default: this repository; verify/staging-overrides.sh passes a copy and
# compares).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"
# This repository's go.mod follows the newest release line, whatever LINE says.
unset LINE

component::load kubernetes
component::is_materialised || "${REPO_ROOT}/hack/make-rules/materialize.sh" kubernetes

root="${TARGET_ROOT:-${REPO_ROOT}}"
overrides="${root}/staging-overrides/k8s.io"
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
before="$(sha256sum <"${root}/go.mod")"
# Drop replacements of modules the tree no longer has, then set the current ones.
while read -r old; do
  go mod edit -dropreplace "${old}" "${root}/go.mod"
done < <(cd "${root}" && go mod edit -json | jq -r '.Replace[]? | select(.New.Path | startswith("./staging-overrides/")) | .Old.Path')
# Modules required from the tree are required at the pinned versions, so that
# go.mod names the release it is built on (a replace makes the version moot
# for the build, not for whoever reads go.mod).
while read -r req; do
  if [[ "${req}" == k8s.io/kubernetes ]]; then
    args+=(-require "k8s.io/kubernetes@${COMPONENT_VERSION}")
  elif printf '%s\n' "${names[@]}" | grep -qxF "${req#k8s.io/}"; then
    args+=(-require "${req}@${COMPONENT_STAGING_VERSION}")
  fi
done < <(cd "${root}" && go mod edit -json | jq -r '.Require[]? | select(.Path | startswith("k8s.io/")) | .Path')
(cd "${root}" && go mod edit "${args[@]}")
if [[ "$(sha256sum <"${root}/go.mod")" != "${before}" ]]; then
  # The pinned release moved: its modules may require newer dependencies.
  (cd "${root}" && GOFLAGS=-mod=mod go mod tidy) || fatal "go mod tidy failed in ${root}"
fi
log "staging-overrides: k8s.io/kubernetes and ${#names[@]} staging modules -> ${COMPONENT_TREE#"${REPO_ROOT}/"}"
