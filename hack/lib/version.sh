#!/usr/bin/env bash
# Version stamping for the patched Kubernetes binaries, in the form upstream's
# hack/lib/version.sh uses (the same -X keys, set in both
# k8s.io/component-base/version and k8s.io/client-go/pkg/version), and for
# the descheduler in the form of its Makefile (version::descheduler_ldflags).
#
# The fork version is <upstream version>-<FORK_NAME>.<patches on base>, e.g.
# v1.37.1-guard.12: a semver pre-release of the upstream release, which
# `kubectl version`, kind and the apiserver's compatibility version parse.
# A tree with uncommitted edits gets "-dirty" appended, as upstream does.
# The build date is the commit date of the tree's HEAD (SOURCE_DATE_EPOCH),
# so the same tree always builds the same bytes.

# version::vars: sets FORK_GIT_VERSION, FORK_GIT_COMMIT, FORK_GIT_TREE_STATE,
# FORK_GIT_MAJOR, FORK_GIT_MINOR, FORK_BUILD_DATE for the loaded component.
version::vars() {
  local fork_name count
  fork_name="$(source "${REPO_ROOT}/build/${COMPONENT_NAME}/component.env" && echo "${FORK_NAME:?FORK_NAME is not set}")"
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
  export FORK_GIT_VERSION FORK_GIT_COMMIT FORK_GIT_TREE_STATE FORK_GIT_MAJOR FORK_GIT_MINOR FORK_BUILD_DATE SOURCE_DATE_EPOCH
}

# version::ldflags PKG...: the -X flags that stamp the version variables of each PKG.
version::ldflags() {
  local pkg key val
  local -a flags=()
  for pkg in "$@"; do
    for key in buildDate gitCommit gitTreeState gitVersion gitMajor gitMinor; do
      case "${key}" in
        buildDate) val="${FORK_BUILD_DATE}" ;;
        gitCommit) val="${FORK_GIT_COMMIT}" ;;
        gitTreeState) val="${FORK_GIT_TREE_STATE}" ;;
        gitVersion) val="${FORK_GIT_VERSION}" ;;
        gitMajor) val="${FORK_GIT_MAJOR}" ;;
        gitMinor) val="${FORK_GIT_MINOR}" ;;
      esac
      flags+=("-X '${pkg}.${key}=${val}'")
    done
  done
  echo "${flags[*]}"
}

# version::descheduler_ldflags PKG: the -X flags of the descheduler's version
# package PKG, the four upstream's Makefile sets (version, buildDate,
# gitbranch, gitsha1), from version::vars. Upstream's VERSION is
# v<date>-<git describe>; ours is the fork version, e.g. v0.36.0-guard.0 (the
# descheduler derives Major/Minor only from its own format and leaves them
# empty for this one).
version::descheduler_ldflags() {
  local pkg="$1" branch
  branch="$(component::git branch --show-current)"
  echo "-X '${pkg}.version=${FORK_GIT_VERSION}' -X '${pkg}.buildDate=${FORK_BUILD_DATE}'" \
    "-X '${pkg}.gitbranch=${branch:-HEAD}' -X '${pkg}.gitsha1=${FORK_GIT_COMMIT}'"
}
