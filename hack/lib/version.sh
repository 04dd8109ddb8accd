#!/usr/bin/env bash
# The version stamps of a component's binaries: version::vars sets FORK_*,
# and each component's GO_LDFLAGS (component.env, hack/lib/build.sh) puts
# them where its upstream does (kubernetes: the -X keys of upstream's
# hack/lib/version.sh in k8s.io/component-base/version and
# k8s.io/client-go/pkg/version; the descheduler: those of its Makefile).
#
# The fork version is <upstream version>-<FORK_NAME>.<patches on base>, e.g.
# vX.Y.Z-guard.12 for release vX.Y.Z with 12 patches: a semver pre-release of the upstream release, which
# `kubectl version`, kind and the apiserver's compatibility version parse.
# A tree with uncommitted edits gets "-dirty" appended, as upstream does.
# The build date is the commit date of the tree's HEAD (SOURCE_DATE_EPOCH),
# so the same tree always builds the same bytes.

# version::vars: sets FORK_GIT_VERSION, FORK_GIT_COMMIT, FORK_GIT_TREE_STATE,
# FORK_GIT_MAJOR, FORK_GIT_MINOR, FORK_GIT_BRANCH, FORK_BUILD_DATE for the
# loaded component.
version::vars() {
  local fork_name count
  fork_name="$(component::setting "${COMPONENT_NAME}" FORK_NAME)"
  [[ -n "${fork_name}" ]] || fatal "build/${COMPONENT_NAME}/component.env: FORK_NAME is not set"
  count="$(component::git rev-list --count "${COMPONENT_BASE_TAG}..HEAD")"
  FORK_GIT_COMMIT="$(component::git rev-parse HEAD)"
  FORK_GIT_VERSION="${COMPONENT_VERSION}-${fork_name}.${count}"
  FORK_GIT_TREE_STATE=clean
  if [[ -n "$(component::git status --porcelain --untracked-files=no)" ]]; then
    FORK_GIT_TREE_STATE=dirty
    FORK_GIT_VERSION+="-dirty"
  fi
  [[ "${COMPONENT_VERSION}" =~ ^v([0-9]+)\.([0-9]+)\. ]] || fatal "cannot parse ${COMPONENT_VERSION}"
  FORK_GIT_MAJOR="${BASH_REMATCH[1]}"
  FORK_GIT_MINOR="${BASH_REMATCH[2]}"
  SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(component::git log -1 --format=%ct HEAD)}"
  FORK_BUILD_DATE="$(date --date="@${SOURCE_DATE_EPOCH}" -u +'%Y-%m-%dT%H:%M:%SZ')"
  FORK_GIT_BRANCH="$(component::git branch --show-current)"
  FORK_GIT_BRANCH="${FORK_GIT_BRANCH:-HEAD}"
  export FORK_GIT_BRANCH FORK_GIT_VERSION FORK_GIT_COMMIT FORK_GIT_TREE_STATE FORK_GIT_MAJOR FORK_GIT_MINOR FORK_BUILD_DATE SOURCE_DATE_EPOCH
}

# version::of COMPONENT [WHAT_TO_RUN]: prints "<fork version> <SOURCE_DATE_EPOCH>
# <commit>" of COMPONENT's materialised tree (in a subshell: the caller's
# loaded component and FORK_* stay as they are); fails, saying to run
# WHAT_TO_RUN (default make build), when the tree is not materialised.
version::of() {
  (
    component::load "$1"
    component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run ${2:-make build}"
    version::vars
    echo "${FORK_GIT_VERSION} ${SOURCE_DATE_EPOCH} ${FORK_GIT_COMMIT}"
  )
}
