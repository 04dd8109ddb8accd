#!/usr/bin/env bash
# `make test-release-modules`: checks that topics of a patch series stand on
# the pristine upstream release alone, with the release's own go.mod (its
# k8s.io/* modules from the Go module proxy, not kube-guard's patched staging
# tree): for each topic named in build/<component>/release-modules, a scratch
# checkout of the untouched release (tag upstream/<pin> of the materialised
# tree) gets the topic's patches, after those of the topics it depends on,
# with `git am`, builds (`go build ./...`), and passes the unit tests of the
# packages those patches touch (build/<component>/known-failures skipped, as
# in `make test-upstream`, and the upstream flakes of
# build/<component>/upstream-flakes that a topic outside the closure fixes).
#
# build/<component>/release-modules: one topic a line, e.g.
# "evictions-in-background": it must stand on the release as upstream ships
# it. This is what makes such a topic a candidate for an upstream pull request
# against that release; other topics may need kube-guard's Kubernetes pin (a
# newer API).
#
# Usage: test-release-modules.sh [COMPONENT...] (default: every component
# with a release-modules file). Scratch checkouts go to _output/release-modules.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

SCRATCH="${OUTPUT_DIR}/release-modules"

# check_topic NAME: one topic of the loaded component, with its dependencies.
check_topic() {
  local name="$1" dir skip patches pkgs status=0 closure
  closure="$(component::topic_closure "${name}" | paste -sd' ' -)"
  mapfile -t patches < <(component::closure_files "${name}")
  dir="${SCRATCH}/${COMPONENT_NAME}-${name}"
  rm -rf "${dir}"
  mkdir -p "${SCRATCH}"
  component::git worktree prune
  component::git worktree add -q --detach "${dir}" "${COMPONENT_UPSTREAM_TAG}"
  # shellcheck disable=SC2064
  trap "component::git worktree remove --force '${dir}' >/dev/null 2>&1 || rm -rf '${dir}'" RETURN
  log "${COMPONENT_NAME} ${name}: topics ${closure} (${#patches[@]} patches) on ${COMPONENT_UPSTREAM_TAG} with its own go.mod"
  GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git -C "${dir}" -c commit.gpgsign=false am -q --3way "${patches[@]}" ||
    fatal "${COMPONENT_NAME} ${name}: topics ${closure} do not apply to ${COMPONENT_UPSTREAM_TAG} (scratch checkout: ${dir})"
  mapfile -t pkgs < <(touched_go_dirs "${dir}" "${COMPONENT_UPSTREAM_TAG}" | sed 's#^#./#')
  # shellcheck disable=SC2086
  skip="$(component::skip_pattern ${closure})"
  local skipflag=()
  [[ -z "${skip}" ]] || skipflag=(-skip "${skip}")
  (
    cd "${dir}"
    export GOWORK=off GOFLAGS=
    go build ./... || exit 1
    # -vet=off: these are the patch files that `make test-upstream` already
    # tests, vet included, in the series' tree; vetting every dependency
    # again against the release's modules would only repeat it.
    ((${#pkgs[@]} == 0)) || go test -vet=off "${skipflag[@]}" "${pkgs[@]}"
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
  while read -r name; do
    check_topic "${name}" || status=1
  done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "${list}")
done
exit "${status}"
