#!/usr/bin/env bash
# Go builds of a component's binaries, from what its component.env declares:
#   GO_BUILD_ENV    environment of `go build` (e.g. "GOWORK=off GOFLAGS=")
#   GO_BUILD_FLAGS  more `go build` flags (e.g. "-tags selinux,notest")
#   GO_LDFLAGS      -ldflags, single-quoted in component.env: ${FORK_*} in it
#                   are the version stamps of hack/lib/version.sh
#                   (version::vars), filled in here
# Every build is CGO_ENABLED=0 and -trimpath. Sourced after init.sh.

# build::expand TEMPLATE: TEMPLATE with each ${FORK_*} replaced by its value.
build::expand() {
  local s="$1" v
  # Line continuations in component.env are spaces here.
  s="${s//\\$'\n'/ }"
  s="$(tr -s ' ' <<<"${s}")"
  for v in FORK_GIT_VERSION FORK_GIT_COMMIT FORK_GIT_TREE_STATE FORK_GIT_MAJOR FORK_GIT_MINOR FORK_GIT_BRANCH FORK_BUILD_DATE; do
    s="${s//\$\{${v}\}/${!v:-}}"
  done
  [[ "${s}" != *'${'* ]] || fatal "build/${COMPONENT_NAME}/component.env: GO_LDFLAGS uses a variable other than \${FORK_*}: ${s}"
  printf '%s' "${s}"
}

# build::go TREE OUT BINARY...: builds ./cmd/<binary> of TREE (or the package
# BINARY_PACKAGES names for it) into OUT, the way the loaded component's
# component.env says.
build::go() {
  local tree="$1" out="$2" b ldflags
  shift 2
  local -a go_env=() go_flags=() pkgs=()
  read -ra go_env <<<"$(component::setting "${COMPONENT_NAME}" GO_BUILD_ENV)"
  read -ra go_flags <<<"$(component::setting "${COMPONENT_NAME}" GO_BUILD_FLAGS)"
  ldflags="$(build::expand "$(component::setting "${COMPONENT_NAME}" GO_LDFLAGS)")"
  local -A packages=()
  local p
  for p in $(component::setting "${COMPONENT_NAME}" BINARY_PACKAGES); do
    packages[${p%%=*}]="${p#*=}"
  done
  for b in "$@"; do
    if [[ -n "${packages[${b}]:-}" ]]; then
      [[ "${packages[${b}]##*/}" == "${b}" ]] || fatal "build/${COMPONENT_NAME}/component.env: BINARY_PACKAGES: ${b}=${packages[${b}]} would build ${packages[${b}]##*/}"
      pkgs+=("${packages[${b}]}")
      continue
    fi
    [[ -d "${tree}/cmd/${b}" ]] || fatal "unknown binary ${b}: ${tree}/cmd/${b} does not exist"
    pkgs+=("./cmd/${b}")
  done
  mkdir -p "${out}"
  (
    cd "${tree}" || exit 1
    env CGO_ENABLED=0 "${go_env[@]}" go build -trimpath "${go_flags[@]}" -ldflags "${ldflags}" -o "${out}/" "${pkgs[@]}"
  )
  for b in "$@"; do
    log "  ${out}/${b}"
  done
}

# build::module_served MODULE@VERSION: true when the Go module proxy (or the
# module cache) serves the module's zip.
build::module_served() {
  local tmp rc=0
  tmp="$(mktemp -d)"
  (cd "${tmp}" && GOWORK=off GOFLAGS=-mod=mod go mod download "$1" >/dev/null 2>&1) || rc=1
  rm -rf "${tmp}"
  return "${rc}"
}

# build::borrowed NAME BINARY...: prints those of BINARY... that the selected
# line of component NAME takes from another line: the line.env of a line
# whose node binaries import a module the proxy refuses names them
# (BORROWED_BINARIES), the module (BORROWED_WHILE_REFUSED, MODULE@VERSION)
# and the line that builds them instead (BORROWED_FROM_LINE, a release within
# upstream's version-skew policy). Once the proxy serves the module, the line
# builds them itself and nothing is borrowed.
build::borrowed() {
  local name="$1" b want
  shift
  local borrowed module
  borrowed="$(component::setting "${name}" BORROWED_BINARIES)"
  module="$(component::setting "${name}" BORROWED_WHILE_REFUSED)"
  [[ -n "${borrowed}" && -n "${module}" ]] || return 0
  local -a hits=()
  for b in "$@"; do
    for want in ${borrowed}; do
      [[ "${b}" != "${want}" ]] || hits+=("${b}")
    done
  done
  [[ ${#hits[@]} -gt 0 ]] || return 0
  if build::module_served "${module}"; then
    log "line $(line::selected): the Go module proxy serves ${module}: ${hits[*]} built from this line's tree"
    return 0
  fi
  printf '%s\n' "${hits[@]}"
}
