#!/usr/bin/env bash
# `make topic-bisect TOPIC=<topic> [COMPONENT=<c>] [LINE=<line>]`: every patch
# of one topic builds and passes its own tests, on its own. In a git worktree
# with the topic and the topics it depends on (component::topic_worktree, at
# _output/src/topic-bisect-<c>), each commit of the topic is checked out in
# turn, from the first: `go vet` on the packages whose files it touches (their
# code and their tests compile), then `go test` on them (integration packages
# too, with the project's etcd first on PATH; build/<c>/known-failures
# skipped, as make test-upstream does). A bisection that lands on any patch
# of the topic finds a tree that builds and passes those tests. The
# materialised tree itself is never touched.
#
# Usage: topic-bisect.sh COMPONENT TOPIC [go test flags...]
#   BISECT_TEST=0  only vets (each patch builds, its tests compile)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

[[ $# -ge 2 && -n "$2" ]] || fatal "usage: make topic-bisect TOPIC=<topic> [COMPONENT=<c>] [LINE=<line>] (topics: patches/<c>/<line>/topics)"
component::load "$1"
topic="$2"
shift 2
component::is_materialised || "${REPO_ROOT}/hack/make-rules/materialize.sh" "${COMPONENT_NAME}"
mapfile -t own < <(component::topic_files "${topic}")
((${#own[@]} > 0)) || fatal "$(component::rel_patches)/${topic} has no patches"
dir="$(component::topic_worktree "${topic}" topic-bisect)"
mapfile -t commits < <(git -C "${dir}" rev-list --reverse "HEAD~${#own[@]}..HEAD")

mapfile -t closure < <(component::topic_closure "${topic}")
skip="$(component::skip_pattern "${closure[@]}")"
skipflag=()
[[ -z "${skip}" ]] || skipflag=(-skip "${skip}")
build_env="$(component::setting "${COMPONENT_NAME}" GO_BUILD_ENV)"
export PATH="${OUTPUT_BIN}:${PATH}"

failed=()
for c in "${commits[@]}"; do
  git -C "${dir}" checkout --quiet --detach "${c}"
  name="$(git -C "${dir}" log -1 --format=%s "${c}")"
  mapfile -t pkgs < <(touched_go_dirs "${dir}" "${c}^" | sed 's#^#./#')
  if ((${#pkgs[@]} == 0)); then
    log "${topic}: ${name}: touches no Go package"
    continue
  fi
  start="${SECONDS}"
  # shellcheck disable=SC2086
  if ! (cd "${dir}" && env ${build_env} GOFLAGS='' go vet "${pkgs[@]}"); then
    failed+=("${name} (go vet)")
    continue
  fi
  if [[ "${BISECT_TEST:-1}" != 0 ]]; then
    # shellcheck disable=SC2086
    if ! (cd "${dir}" && env ${build_env} GOFLAGS='' go test -timeout 40m "${skipflag[@]}" "$@" "${pkgs[@]}"); then
      failed+=("${name} (go test)")
      continue
    fi
  fi
  log "${topic}: ${name}: ${#pkgs[@]} packages $( [[ "${BISECT_TEST:-1}" != 0 ]] && echo "vetted and tested" || echo vetted) ($((SECONDS - start)) s)"
done
if ((${#failed[@]} > 0)); then
  printf '!!! %s\n' "${failed[@]}" >&2
  fatal "${COMPONENT_NAME}/${topic}: ${#failed[@]} of ${#commits[@]} patches fail on their own (the worktree ${dir#"${REPO_ROOT}/"} is left at the last one)"
fi
log "${COMPONENT_NAME}/${topic}: each of its ${#commits[@]} patches builds and passes the tests of the packages it touches on its own"
