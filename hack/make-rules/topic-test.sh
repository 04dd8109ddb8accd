#!/usr/bin/env bash
# `make topic-test TOPIC=<topic> [COMPONENT=<c>]`: one topic of a patch series
# on a tree that has only it and the topics it depends on (TOPIC.md's
# Depends, transitively): a git worktree of the component's tree at
# _output/src/topic-test-<c> (component::topic_worktree), then built (the
# component's TOPIC_TEST_BUILD packages, with its build flags) and tested as
# `make test-upstream` tests the whole series: the unit tests of every
# package the patches touch, and for kubernetes their integration tests,
# with the project's etcd first on PATH. The materialised tree itself is
# never touched.
#
# Usage: topic-test.sh COMPONENT TOPIC [go test flags...]
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

[[ $# -ge 2 && -n "$2" ]] || fatal "usage: make topic-test TOPIC=<topic> [COMPONENT=<c>] (topics: patches/<c>/<line>/topics)"
component::load "$1"
topic="$2"
shift 2
component::is_materialised || "${REPO_ROOT}/hack/make-rules/materialize.sh" "${COMPONENT_NAME}"
closure="$(component::topic_closure "${topic}" | paste -sd' ' -)"
dir="$(component::topic_worktree "${topic}")"

build_env="$(component::setting "${COMPONENT_NAME}" GO_BUILD_ENV)"
build_flags="$(component::setting "${COMPONENT_NAME}" GO_BUILD_FLAGS)"
read -ra build_pkgs <<<"$(component::setting "${COMPONENT_NAME}" TOPIC_TEST_BUILD)"
if ((${#build_pkgs[@]} > 0)); then
  log "${COMPONENT_NAME}/${topic}: go build ${build_pkgs[*]}"
  # shellcheck disable=SC2086
  (cd "${dir}" && env ${build_env} go build ${build_flags} -o /dev/null "${build_pkgs[@]}") ||
    fatal "${COMPONENT_NAME}/${topic}: does not build with ${closure} alone"
fi
TEST_UPSTREAM_COMPONENTS="${COMPONENT_NAME}" COMPONENT_TREE_AT="${dir}" \
  "${REPO_ROOT}/hack/make-rules/test-upstream.sh" "$@" ||
  fatal "${COMPONENT_NAME}/${topic}: its tests fail on a tree with ${closure} alone"
log "${COMPONENT_NAME}/${topic}: builds and passes the tests of the packages it touches, with ${closure} alone"
