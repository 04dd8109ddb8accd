#!/usr/bin/env bash
# Builds the patched binaries into _output/bin/, version-stamped
# (hack/lib/version.sh), each from the materialised tree of its component,
# the way build/<component>/component.env says (BINARIES, GO_BUILD_ENV,
# GO_BUILD_FLAGS, GO_LDFLAGS: hack/lib/build.sh). Materialises the tree and
# applies patches/<component> first when needed (SKIP_APPLY=1 skips that); a
# component built on another's staging modules (STAGING_FROM) has that one
# applied first too. Go's build cache and the build id in each binary make a
# re-run with nothing changed a no-op.
#
# Usage: build.sh [component|binary...]   (default: every component)
# A component's name builds all its BINARIES; a binary is built from the
# component whose BINARIES (or OPTIONAL_BINARIES, built only by name) list it.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/version.sh"
source "${REPO_ROOT}/hack/lib/build.sh"

# component_of BINARY: the component whose BINARIES or OPTIONAL_BINARIES lists BINARY.
component_of() {
  local c b
  while read -r c; do
    for b in $(component::setting "${c}" BINARIES) $(component::setting "${c}" OPTIONAL_BINARIES); do
      if [[ "${b}" == "$1" ]]; then
        echo "${c}"
        return
      fi
    done
  done < <(component::all)
  fatal "unknown binary $1 on release line $(line::selected): no component of that line (build/<component>/component.env with patches/<component>/<line>/) lists it in BINARIES or OPTIONAL_BINARIES"
}

# build::component NAME BINARY...: applies NAME's series (and the one it is
# built on), then builds the binaries.
build::component() {
  local name="$1" from
  shift
  from="$(component::setting "${name}" STAGING_FROM)"
  if [[ -z "${SKIP_APPLY:-}" ]]; then
    [[ -z "${from}" ]] || "${REPO_ROOT}/hack/make-rules/apply.sh" "${from}"
    "${REPO_ROOT}/hack/make-rules/apply.sh" "${name}"
  fi
  local from_tree=""
  if [[ -n "${from}" ]]; then
    component::load "${from}"
    from_tree="${COMPONENT_TREE#"${REPO_ROOT}/"}"
    component::is_materialised ||
      fatal "${COMPONENT_TREE} is not materialised: ${name} builds against its staging modules (run 'make apply COMPONENT=${from}')"
  fi
  component::load "${name}"
  local -a borrowed=() own=()
  mapfile -t borrowed < <(build::borrowed "${name}" "$@")
  local b
  for b in "$@"; do
    [[ " ${borrowed[*]} " == *" ${b} "* ]] || own+=("${b}")
  done
  if [[ ${#borrowed[@]} -gt 0 ]]; then
    local from_line out
    from_line="$(component::setting "${name}" BORROWED_FROM_LINE)"
    [[ -n "${from_line}" && "${from_line}" != "$(line::selected)" ]] ||
      fatal "$(component::rel_patches)/line.env: BORROWED_BINARIES needs BORROWED_FROM_LINE, another release line"
    log "line $(line::selected): the Go module proxy refuses $(component::setting "${name}" BORROWED_WHILE_REFUSED), which ${borrowed[*]} import: taking them from line ${from_line} (version skew: docs/lines.md)"
    LINE="${from_line}" "${BASH_SOURCE[0]}" "${borrowed[@]}"
    out="$(line::bin)"
    mkdir -p "${out}"
    for b in "${borrowed[@]}"; do
      cp -p "$(LINE="${from_line}" line::bin)/${b}" "${out}/${b}.tmp"
      mv -f "${out}/${b}.tmp" "${out}/${b}"
      log "  ${out}/${b} (line ${from_line}'s)"
    done
  fi
  [[ ${#own[@]} -gt 0 ]] || return 0
  version::vars
  log "building ${own[*]} ${FORK_GIT_VERSION} (${FORK_GIT_COMMIT:0:12}, ${FORK_GIT_TREE_STATE})${from:+, k8s.io/* from ${from_tree}}"
  build::go "${COMPONENT_TREE}" "$(line::bin)" "${own[@]}"
}

args=("$@")
[[ ${#args[@]} -gt 0 ]] || mapfile -t args < <(component::all)
# Group the binaries by component, components in the order they first appear.
declare -A by_component=()
order=()
for a in "${args[@]}"; do
  if [[ -f "${REPO_ROOT}/build/${a}/component.env" ]]; then
    c="${a}"
    bins="$(component::setting "${c}" BINARIES)"
    [[ -n "${bins}" ]] || { log "${c}: no BINARIES to build"; continue; }
  else
    c="$(component_of "${a}")"
    bins="${a}"
  fi
  [[ -n "${by_component[${c}]:-}" ]] || order+=("${c}")
  by_component[${c}]+="${bins} "
done
for c in "${order[@]}"; do
  # A subshell each: version::vars exports SOURCE_DATE_EPOCH, the date of that component's HEAD.
  # shellcheck disable=SC2086
  (build::component "${c}" ${by_component[${c}]})
done
