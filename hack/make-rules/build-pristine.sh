#!/usr/bin/env bash
# Builds pristine upstream binaries, without our patches, into
# _output/bin/pristine/, for the tests of version skew and downgrade (a
# patched kube-apiserver's objects read and written by upstream's on the same
# etcd): each component's PRISTINE_BINARIES (component.env). The source is
# the base tag of the materialised tree (the upstream module plus the
# offline-build adjustments), extracted to _output/pristine/<component>; the
# flags are the component's (hack/lib/build.sh, as build.sh), and the version
# stamp is upstream's own (the pinned release, tree state clean, the base
# commit). Go's build cache shares every package the patches do not touch
# with the patched build.
#
# Usage: build-pristine.sh [component...]   (default: every component that sets PRISTINE_BINARIES)
# PRISTINE_BINARIES_EXTRA (space-separated) builds these binaries of each
# named component too (make kind-upgrade-test: kube-proxy and the images'
# kube-log-runner, for pristine upstream's images).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/build.sh"

mapfile -t components < <(component::named_or_all "$@")
for c in "${components[@]}"; do
  read -ra binaries <<<"$(component::setting "${c}" PRISTINE_BINARIES) ${PRISTINE_BINARIES_EXTRA:-}"
  [[ ${#binaries[@]} -gt 0 ]] || continue
  (
    component::load "${c}"
    component::is_materialised || "${REPO_ROOT}/hack/make-rules/materialize.sh" "${c}"
    tree="$(component::extract_pristine)"
    [[ "${COMPONENT_VERSION}" =~ ^v([0-9]+)\.([0-9]+)\. ]] || fatal "cannot parse ${COMPONENT_VERSION}"
    FORK_GIT_MAJOR="${BASH_REMATCH[1]}"
    FORK_GIT_MINOR="${BASH_REMATCH[2]}"
    FORK_GIT_VERSION="${COMPONENT_VERSION}"
    FORK_GIT_COMMIT="$(component::git rev-parse "${COMPONENT_BASE_TAG}^{commit}")"
    FORK_GIT_TREE_STATE=clean
    FORK_GIT_BRANCH=HEAD
    SOURCE_DATE_EPOCH="$(component::git log -1 --format=%ct "${FORK_GIT_COMMIT}")"
    FORK_BUILD_DATE="$(date --date="@${SOURCE_DATE_EPOCH}" -u +'%Y-%m-%dT%H:%M:%SZ')"
    export SOURCE_DATE_EPOCH FORK_GIT_MAJOR FORK_GIT_MINOR FORK_GIT_VERSION FORK_GIT_COMMIT FORK_GIT_TREE_STATE FORK_GIT_BRANCH FORK_BUILD_DATE
    log "building pristine ${binaries[*]} ${FORK_GIT_VERSION} (${FORK_GIT_COMMIT:0:12}) from ${tree}"
    build::go "${tree}" "$(line::bin)/pristine" "${binaries[@]}"
  )
done
