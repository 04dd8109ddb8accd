#!/usr/bin/env bash
# The kubernetes component's codegen hook (hack/make-rules/codegen.sh
# kubernetes STEP... runs it; so do verify-codegen.sh and the rebase tool).
# Runs upstream's own generators and fixture updaters, offline, in the
# materialised tree ${OUTPUT_SRC}/kubernetes (whatever HEAD it has: base or
# with patches/kubernetes applied). Upstream's scripts are run unchanged; this
# script only prepares what they expect to find and cannot fetch here.
#
# Usage: codegen.sh [all|codegen|openapi-spec|api-fixtures|featuregates|rbac-fixtures]...
#   codegen       hack/update-codegen.sh (every generator: protobuf, deepcopy,
#                 defaulter, conversion, validation, swagger docs, openapi,
#                 applyconfigurations, clients, listers, informers, register,
#                 prerelease-lifecycle, proto bindings, sub-projects)
#   openapi-spec  hack/update-openapi-spec.sh (api/openapi-spec, api/discovery)
#   api-fixtures  hack/update-generated-api-compatibility-data.sh
#   featuregates  hack/update-featuregates.sh
#   rbac-fixtures UPDATE_BOOTSTRAP_POLICY_FIXTURE_DATA=true go test of
#                 plugin/pkg/auth/authorizer/rbac/bootstrappolicy (no upstream script)
# Default: all, in that order. Each step logs its wall time; the log of each
# step is kept in ${OUTPUT_DIR}/logs/codegen-<step>.log.
# CODEGEN_GENERATORS="protobuf ..." limits the codegen step to those of
# update-codegen.sh's generators (`hack/update-codegen.sh -?` lists them), for
# the edit loop; verify-codegen.sh always runs them all.
#
# What stood in the way offline, and what this script does about it:
# - hack/tools is a module of its own upstream, so it is not in the module zip,
#   and update-codegen.sh / hack/lib/protoc.sh `go -C hack/tools install`
#   goimports, protoc-gen-go and protoc-gen-go-grpc from it: a minimal hack/tools
#   (go.mod with `tool` lines, go.sum, go.work, go.work.sum) is in
#   build/kubernetes/overlay and so in the base commit.
# - The generators are installed with GOPROXY=off, and kube::golang::setup_env
#   moves GOPATH (and so GOMODCACHE/GOCACHE) under the tree's _output/: we export
#   GOMODCACHE and GOCACHE of this machine's Go, which setup_env keeps, and
#   download the workspace's modules first. That download goes through a scratch
#   copy of go.work (absolute paths), because `go mod download`/`go list -m all`
#   in the tree write a missing go.mod hash into the tree's go.work.sum.
# - .go-version would make setup_env fetch another Go: GOTOOLCHAIN (the line's,
#   line::toolchain in hack/lib/init.sh: the Go on PATH unless the line names
#   one) and FORCE_HOST_GO=1 keep the go command's choice.
# - protoc 23.4: upstream downloads it from GitHub (kube::protoc::install, run
#   unconditionally by update-codegen.sh) or falls back to docker. The npm
#   package protoc@23.4.0 ships the official protoc 23.4 binaries: it is fetched
#   with `npm pack`, checked against a pinned sha512, and laid out exactly as
#   kube::protoc::install leaves it (third_party/protoc -> protoc-v23.4-<os>-<arch>,
#   both ignored by upstream's .gitignore), so the install is a no-op and the
#   version check passes with a real 23.4. Debian's protobuf-compiler (3.21.12)
#   is not used: it fails the check, and protoc-gen-go writes the protoc version
#   into every api.pb.go header, so it cannot reproduce upstream's files.
# - gogo.proto: _update-generated-protobuf-dockerized.sh passes
#   --proto-import=vendor/ for github.com/gogo/protobuf/gogoproto/gogo.proto, and
#   vendor/ is not in the module zip. For the codegen step only, vendor/ holds
#   one symlink, github.com/gogo/protobuf -> the gogo module in GOMODCACHE, and
#   GOFLAGS carries -mod=readonly so that the vendor/ directory does not switch
#   go into vendor mode; the scaffold is removed again on exit.
# - Makefile: update-openapi-spec.sh runs `make -C KUBE_ROOT`, and the root
#   Makefile is a symlink upstream (-> build/root/Makefile), which module zips
#   drop: the overlay restores the symlink.
# - etcd: kube::etcd::install downloads etcd v${ETCD_VERSION} from GitHub unless
#   third_party/etcd links to etcd-v${ETCD_VERSION}-<os>-<arch>. We take the
#   etcd on PATH, else ${OUTPUT_BIN}/etcd (built by tools.sh etcd if missing),
#   lay it out that way (ignored by .gitignore) and set ETCD_VERSION, which
#   upstream's scripts honour, to that binary's own version.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../hack/lib/init.sh"

ALL_STEPS=(codegen openapi-spec api-fixtures featuregates rbac-fixtures)

# protoc, as upstream's hack/lib/protoc.sh requires it, from the npm registry.
PROTOC_NPM_PACKAGE="protoc"
declare -A PROTOC_NPM_SHA512=(
  [23.4]="iiTiBj/lDHvpZAAb0tE373W48QdAKNLsF18vY3PdKES4gIy5hV/SjMYCpsufVRVpatC9jnN744ENr8ij0LN+sQ=="
)

component::load kubernetes
component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run hack/make-rules/materialize.sh first"
TREE="${COMPONENT_TREE}"
LOG_DIR="${OUTPUT_DIR}/logs"
CACHE_DIR="${OUTPUT_DIR}/cache"

# The Go environment every step runs with. Computed before upstream's
# setup_env points GOPATH into the tree; setup_env keeps values already set.
codegen::go_env() {
  GOMODCACHE="$(go env GOMODCACHE)"
  GOCACHE="$(go env GOCACHE)"
  export GOMODCACHE GOCACHE
  GOTOOLCHAIN="$(line::toolchain "$(line::selected)")"
  export GOTOOLCHAIN FORCE_HOST_GO=1
  unset GOWORK GOBIN
}

# Fills the module cache with every module the kubernetes workspace and the
# hack/tools module build and test with, so that upstream's GOPROXY=off
# installs find them, without writing into the tree.
codegen::download_modules() {
  local scratch
  scratch="$(mktemp -d)"
  sed -E "s#^([[:space:]]*)\.(/|\$)#\1${TREE}\2#" "${TREE}/go.work" >"${scratch}/go.work"
  cp "${TREE}/go.work.sum" "${scratch}/go.work.sum"
  log "downloading the workspace's modules into ${GOMODCACHE}"
  # A module the line knows the proxy refuses (BORROWED_WHILE_REFUSED in its
  # line.env: only node binaries import it, and no generator loads them) is
  # the one failure allowed; go mod download still fetches every other.
  local out refused
  refused="$(component::setting kubernetes BORROWED_WHILE_REFUSED)"
  if ! out="$(cd "${scratch}" && GOWORK="${scratch}/go.work" GOFLAGS=-mod=mod go mod download 2>&1)"; then
    if [[ -n "${refused}" ]] && ! grep -v -e '^go: downloading ' -e '^[[:space:]]*server response:' <<<"${out}" | grep -v -F "${refused}: " | grep -q .; then
      log "the module proxy refuses ${refused} (the line's node binaries import it; docs/lines.md): every other module downloaded"
    else
      printf '%s\n' "${out}" >&2
      rm -rf "${scratch}"
      fatal "go mod download for the kubernetes workspace failed"
    fi
  fi
  rm -rf "${scratch}"
  [[ -f "${TREE}/hack/tools/go.mod" ]] || fatal "${TREE}/hack/tools/go.mod is missing: re-materialise (build/kubernetes/overlay/hack/tools)"
  go -C "${TREE}/hack/tools" mod download || fatal "go mod download for hack/tools failed"
}

codegen::host_os_arch() {
  local arch
  case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) fatal "unsupported machine $(uname -m)" ;;
  esac
  echo "linux-${arch}"
}

# Puts the protoc version hack/lib/protoc.sh asks for where
# kube::protoc::install would have put it.
codegen::install_protoc() {
  local version platform folder npm_arch tgz want got unpack
  version="$(sed -n 's/^PROTOC_VERSION=\([0-9.]*\)$/\1/p' "${TREE}/hack/lib/protoc.sh")"
  [[ -n "${version}" ]] || fatal "cannot read PROTOC_VERSION from ${TREE}/hack/lib/protoc.sh"
  platform="$(codegen::host_os_arch)"
  folder="protoc-v${version}-${platform}"
  if [[ "$(readlink "${TREE}/third_party/protoc" 2>/dev/null)" == "${folder}" ]] &&
    [[ "$("${TREE}/third_party/${folder}/protoc" --version 2>/dev/null)" == "libprotoc ${version}" ]]; then
    return 0
  fi
  want="${PROTOC_NPM_SHA512[${version}]:-}"
  [[ -n "${want}" ]] || fatal "no pinned npm ${PROTOC_NPM_PACKAGE}@${version}.0 checksum in $0: add it to PROTOC_NPM_SHA512"
  case "${platform}" in
    linux-amd64) npm_arch=linux-x86_64 ;;
    linux-arm64) npm_arch=linux-aarch_64 ;;
  esac
  tgz="${CACHE_DIR}/${PROTOC_NPM_PACKAGE}-${version}.0.tgz"
  if [[ ! -f "${tgz}" ]] || [[ "$(openssl dgst -sha512 -binary "${tgz}" | base64 -w0)" != "${want}" ]]; then
    command -v npm >/dev/null || { log "installing npm"; apt-get update -qq && apt-get install -y -qq npm >/dev/null; }
    mkdir -p "${CACHE_DIR}"
    rm -f "${tgz}"
    log "fetching ${PROTOC_NPM_PACKAGE}@${version}.0 from the npm registry"
    npm pack --silent --pack-destination "${CACHE_DIR}" "${PROTOC_NPM_PACKAGE}@${version}.0" >/dev/null
  fi
  got="$(openssl dgst -sha512 -binary "${tgz}" | base64 -w0)"
  [[ "${got}" == "${want}" ]] || fatal "${tgz}: sha512 ${got}, want ${want}"
  unpack="$(mktemp -d)"
  tar -xzf "${tgz}" -C "${unpack}" "package/bin/protoc-${npm_arch}"
  rm -rf "${TREE}/third_party/${folder}"
  mkdir -p "${TREE}/third_party/${folder}"
  install -m 0755 "${unpack}/package/bin/protoc-${npm_arch}" "${TREE}/third_party/${folder}/protoc"
  rm -rf "${unpack}"
  ln -fns "${folder}" "${TREE}/third_party/protoc"
  got="$("${TREE}/third_party/${folder}/protoc" --version)"
  [[ "${got}" == "libprotoc ${version}" ]] || fatal "npm ${PROTOC_NPM_PACKAGE}@${version}.0 gave '${got}'"
  log "protoc: ${got} in third_party/${folder} (as kube::protoc::install lays it out)"
}

# vendor/github.com/gogo/protobuf for the .proto imports of go-to-protobuf.
VENDOR_SCAFFOLD=""
codegen::vendor_scaffold() {
  local gogo
  # A scaffold left behind by a killed run goes; any other vendor/ is not ours.
  if [[ -L "${TREE}/vendor/github.com/gogo/protobuf" ]] &&
    [[ -z "$(find "${TREE}/vendor" -mindepth 1 ! -path "${TREE}/vendor/github.com" ! -path "${TREE}/vendor/github.com/gogo" ! -path "${TREE}/vendor/github.com/gogo/protobuf" -print -quit)" ]]; then
    VENDOR_SCAFFOLD="${TREE}/vendor" codegen::remove_vendor_scaffold
  fi
  if [[ -e "${TREE}/vendor" ]]; then
    fatal "${TREE}/vendor exists: the tree is expected to have no vendor/ (see materialize.sh)"
  fi
  gogo="$(cd "${TREE}" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' github.com/gogo/protobuf)"
  [[ -f "${gogo}/gogoproto/gogo.proto" ]] || fatal "github.com/gogo/protobuf is not in the module cache (${gogo})"
  mkdir -p "${TREE}/vendor/github.com/gogo"
  ln -s "${gogo}" "${TREE}/vendor/github.com/gogo/protobuf"
  VENDOR_SCAFFOLD="${TREE}/vendor"
  trap codegen::remove_vendor_scaffold EXIT
}

codegen::remove_vendor_scaffold() {
  if [[ -n "${VENDOR_SCAFFOLD}" ]]; then
    rm -f "${VENDOR_SCAFFOLD}/github.com/gogo/protobuf"
    rmdir "${VENDOR_SCAFFOLD}/github.com/gogo" "${VENDOR_SCAFFOLD}/github.com" "${VENDOR_SCAFFOLD}" 2>/dev/null || true
    VENDOR_SCAFFOLD=""
  fi
}

# Finds an etcd binary and lays it out as kube::etcd::install would, at that
# binary's version. Prints the version.
codegen::install_etcd() {
  local etcd="" version platform folder
  if command -v etcd >/dev/null; then
    etcd="$(command -v etcd)"
  elif [[ -x "${OUTPUT_BIN}/etcd" ]]; then
    etcd="${OUTPUT_BIN}/etcd"
  elif [[ -f "${REPO_ROOT}/hack/make-rules/tools.sh" ]]; then
    log "no etcd on PATH or in ${OUTPUT_BIN}: building it with hack/make-rules/tools.sh etcd"
    bash "${REPO_ROOT}/hack/make-rules/tools.sh" etcd >&2
    etcd="${OUTPUT_BIN}/etcd"
  fi
  [[ -n "${etcd}" && -x "${etcd}" ]] || fatal "no etcd: put one on PATH or in ${OUTPUT_BIN}"
  etcd="$(readlink -f "${etcd}")"
  # The same parsing as kube::etcd::validate.
  version="$("${etcd}" --version | grep Version | head -n 1 | cut -d " " -f 3)"
  [[ "${version}" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fatal "cannot read the version of ${etcd}"
  platform="$(codegen::host_os_arch)"
  folder="etcd-v${version}-${platform}"
  mkdir -p "${TREE}/third_party/${folder}"
  ln -fns "${etcd}" "${TREE}/third_party/${folder}/etcd"
  ln -fns "${folder}" "${TREE}/third_party/etcd"
  echo "${version}"
}

# The sub-projects that update-codegen.sh's codegen::subprojects runs, as it
# lists them.
codegen::subproject_list() {
  sed -n '/^function codegen::subprojects()/,/^}/p' hack/update-codegen.sh |
    sed -n '/local subs=(/,/)/p' |
    sed -n 's#^[[:space:]]*\(staging/[^[:space:]]*\)[[:space:]]*$#\1#p'
}

# What update-codegen.sh's codegen::subprojects does, for the sub-projects the
# tree has. Upstream's own loop cannot run here: staging/src/k8s.io/code-generator/examples
# is a module of its own (so not in the k8s.io/code-generator zip) and the
# module proxy does not serve k8s.io/code-generator/examples; its generated
# code lives only in that directory, so nothing in the tree depends on it.
codegen::run_subprojects() {
  local subs=() sub
  mapfile -t subs < <(codegen::subproject_list)
  [[ ${#subs[@]} -gt 0 ]] || fatal "cannot find the sub-project list in hack/update-codegen.sh"
  for sub in "${subs[@]}"; do
    if [[ ! -x "${TREE}/${sub}/hack/update-codegen.sh" ]]; then
      log "Skipping subproject ${sub}: not in the tree (a module of its own upstream, not served by the module proxy)"
      continue
    fi
    log "Generating code for subproject ${sub}"
    # In upstream's environment: update-codegen.sh has run kube::golang::setup_env.
    bash -c 'set -o errexit -o nounset -o pipefail
      source hack/lib/init.sh
      kube::golang::setup_env
      cd "$1"
      CODEGEN_PKG="${KUBE_ROOT}/staging/src/k8s.io/code-generator" \
      UPDATE_API_KNOWN_VIOLATIONS="${UPDATE_API_KNOWN_VIOLATIONS:-}" \
      API_KNOWN_VIOLATIONS_DIR="${API_KNOWN_VIOLATIONS_DIR:-"${KUBE_ROOT}/api/api-rules"}" \
        ./hack/update-codegen.sh' codegen-subproject "${sub}"
  done
}

codegen::step::codegen() {
  local all=() before=() after=() g split=""
  codegen::install_protoc
  codegen::vendor_scaffold
  export GOFLAGS="${GOFLAGS:+${GOFLAGS} }-mod=readonly"
  # Every codegen of update-codegen.sh, in its order, with its "subprojects"
  # codegen done by codegen::run_subprojects instead.
  mapfile -t all < <(hack/update-codegen.sh '-?' | sed -n 's/^    \([a-z0-9_]*\)$/\1/p')
  [[ ${#all[@]} -gt 0 ]] || fatal "hack/update-codegen.sh -? listed no codegens"
  if [[ -n "${CODEGEN_GENERATORS:-}" ]]; then
    local want=()
    for g in ${CODEGEN_GENERATORS}; do
      [[ " ${all[*]} " == *" ${g} "* ]] || fatal "CODEGEN_GENERATORS: unknown generator '${g}': one of ${all[*]}"
      want+=("^${g}\$")
    done
    hack/update-codegen.sh "${want[@]}"
    codegen::remove_vendor_scaffold
    return 0
  fi
  for g in "${all[@]}"; do
    if [[ "${g}" == subprojects ]]; then
      split=1
    elif [[ -n "${split}" ]]; then
      after+=("^${g}\$")
    else
      before+=("^${g}\$")
    fi
  done
  if [[ -z "${split}" ]]; then
    hack/update-codegen.sh
  else
    [[ ${#before[@]} -eq 0 ]] || hack/update-codegen.sh "${before[@]}"
    codegen::run_subprojects
    [[ ${#after[@]} -eq 0 ]] || hack/update-codegen.sh "${after[@]}"
  fi
  codegen::remove_vendor_scaffold
}

codegen::step::openapi-spec() {
  local etcd_version upstream_etcd
  etcd_version="$(codegen::install_etcd)"
  # shellcheck disable=SC2016 # a literal ${ETCD_VERSION:-...} is matched
  upstream_etcd="$(sed -n 's/^ETCD_VERSION=\${ETCD_VERSION:-\([0-9.]*\)}$/\1/p' hack/lib/etcd.sh)"
  if [[ "${etcd_version}" != "${upstream_etcd}" ]]; then
    log "etcd ${etcd_version} stands in for the etcd ${upstream_etcd:-?} that hack/lib/etcd.sh names (ETCD_VERSION=${etcd_version})"
  fi
  ETCD_VERSION="${etcd_version}" hack/update-openapi-spec.sh
}

codegen::step::api-fixtures() {
  hack/update-generated-api-compatibility-data.sh
}

codegen::step::featuregates() {
  hack/update-featuregates.sh
}

codegen::step::rbac-fixtures() {
  local pkg=./plugin/pkg/auth/authorizer/rbac/bootstrappolicy
  # As hack/update-generated-api-compatibility-data.sh does for its fixtures:
  # the updating run fails when it changed something, the second must pass.
  UPDATE_BOOTSTRAP_POLICY_FIXTURE_DATA=true go test "${pkg}" -count=1 >/dev/null 2>&1 || true
  go test "${pkg}" -count=1
}

# codegen.sh __step STEP: one step, in a process of its own (so that errexit
# holds inside it while the caller tees its output and checks its status).
if [[ "${1:-}" == __step ]]; then
  cd "${TREE}"
  "codegen::step::${2:?}"
  exit 0
fi

run_steps="$(component::codegen_steps "${ALL_STEPS[@]}" -- "$@")"
mapfile -t run <<<"${run_steps}"

codegen::go_env
codegen::download_modules
mkdir -p "${LOG_DIR}"
declare -A took=()
for s in "${run[@]}"; do
  log "${s}: starting in ${TREE}"
  start="$(date +%s)"
  bash "${BASH_SOURCE[0]}" __step "${s}" 2>&1 | tee "${LOG_DIR}/codegen-${s}.log" ||
    fatal "${s} failed after $(($(date +%s) - start))s (log: ${LOG_DIR}/codegen-${s}.log)"
  took[${s}]=$(($(date +%s) - start))
  log "${s}: done in ${took[${s}]}s"
done
for s in "${run[@]}"; do
  log "$(printf '%-14s %5ss' "${s}" "${took[${s}]}")"
done
