#!/usr/bin/env bash
# `make test-release-modules`: checks that prefixes of a patch series stand on
# the pristine upstream release alone, with the release's own go.mod (its
# k8s.io/* modules from the Go module proxy, not kube-guard's patched staging
# tree): for each line of build/<component>/release-modules, a scratch
# checkout of the untouched release (tag upstream/<pin> of the materialised
# tree) gets the series' first patches with `git am`, builds (`go build
# ./...`), and passes the unit tests of the packages those patches touch
# (build/<component>/known-failures skipped, as in `make test-upstream`).
#
# build/<component>/release-modules: one line per prefix, "<name> <last patch
# number>", e.g. "evictions-in-background 0014": patches 0001-0014 must stand
# on the release as upstream ships it. This is what makes such a prefix a
# candidate for an upstream pull request against that release; the patches
# after it may need kube-guard's Kubernetes pin (a newer API).
#
# Usage: test-release-modules.sh [COMPONENT...] (default: every component
# with a release-modules file). Scratch checkouts go to _output/release-modules.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

SCRATCH="${OUTPUT_DIR}/release-modules"

# prefix_patches LAST: the patch files of the component numbered up to LAST.
prefix_patches() {
  local last="$1" f n
  for f in "${COMPONENT_PATCHES}"/[0-9][0-9][0-9][0-9]-*.patch; do
    [[ -f "${f}" ]] || continue
    n="$(basename "${f}" | cut -c1-4)"
    ((10#${n} <= 10#${last})) && echo "${f}"
  done
}

# check_prefix NAME LAST: one prefix of the loaded component.
check_prefix() {
  local name="$1" last="$2" dir skip patches pkgs status=0
  [[ "${last}" =~ ^[0-9]{4}$ ]] || fatal "build/${COMPONENT_NAME}/release-modules: '${last}' is not a patch number (NNNN)"
  mapfile -t patches < <(prefix_patches "${last}")
  ((${#patches[@]} == 10#${last})) || fatal "build/${COMPONENT_NAME}/release-modules: ${name} wants patches 0001-${last}, patches/${COMPONENT_NAME} has ${#patches[@]} of them"
  dir="${SCRATCH}/${COMPONENT_NAME}-${name}"
  rm -rf "${dir}"
  mkdir -p "${SCRATCH}"
  component::git worktree prune
  component::git worktree add -q --detach "${dir}" "${COMPONENT_UPSTREAM_TAG}"
  # shellcheck disable=SC2064
  trap "component::git worktree remove --force '${dir}' >/dev/null 2>&1 || rm -rf '${dir}'" RETURN
  log "${COMPONENT_NAME} ${name}: patches 0001-${last} on ${COMPONENT_UPSTREAM_TAG} with its own go.mod"
  GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git -C "${dir}" -c commit.gpgsign=false am -q --3way "${patches[@]}" ||
    fatal "${COMPONENT_NAME} ${name}: patches 0001-${last} do not apply to ${COMPONENT_UPSTREAM_TAG} (scratch checkout: ${dir})"
  mapfile -t pkgs < <(touched_go_dirs "${dir}" "${COMPONENT_UPSTREAM_TAG}" | sed 's#^#./#')
  skip="$(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^[[:space:]]*$/d' "${REPO_ROOT}/build/${COMPONENT_NAME}/known-failures" 2>/dev/null | paste -sd'|' -)"
  local skipflag=()
  [[ -z "${skip}" ]] || skipflag=(-skip "${skip}")
  (
    cd "${dir}"
    export GOWORK=off GOFLAGS=
    go build ./... || exit 1
    ((${#pkgs[@]} == 0)) || go test "${skipflag[@]}" "${pkgs[@]}"
  ) || status=1
  if ((status == 0)); then
    log "${COMPONENT_NAME} ${name}: builds and passes the tests of ${#pkgs[@]} touched packages with the release's modules"
  else
    log "${COMPONENT_NAME} ${name}: FAILED with the release's modules"
  fi
  return "${status}"
}

status=0
components=("$@")
if ((${#components[@]} == 0)); then
  mapfile -t components < <(component::all)
fi
for c in "${components[@]}"; do
  list="${REPO_ROOT}/build/${c}/release-modules"
  [[ -f "${list}" ]] || continue
  component::load "${c}"
  component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run 'make apply COMPONENT=${c}' first"
  while read -r name last; do
    check_prefix "${name}" "${last}" || status=1
  done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "${list}")
done
exit "${status}"
