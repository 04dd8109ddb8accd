#!/usr/bin/env bash
# Builds the pinned test tools into _output/bin from the Go module proxy:
#   etcd, etcdctl   go.etcd.io/etcd/{server,etcdctl}/v3, pinned in hack/tools/etcd
#   kwok, kwokctl   sigs.k8s.io/kwok/cmd/{kwok,kwokctl}, pinned in hack/tools/kwok
#   golangci-lint-kube-api-linter
#                   sigs.k8s.io/kube-api-linter's standalone binary (golangci-lint
#                   with the linter built in), pinned in hack/tools/kube-api-linter
#   registry        github.com/distribution/distribution/v3/cmd/registry, pinned
#                   in hack/tools/registry: the registry `make push` is tested
#                   against (test/images)
#   kind            sigs.k8s.io/kind, pinned in hack/tools/kind (make kind-up)
# and, on demand (`tools.sh benchstat`, not in the default set):
#   benchstat       golang.org/x/perf/cmd/benchstat, pinned in hack/tools/benchstat
#                   (make bench-postfilter)
# and, for the kind node image only (`tools.sh node`, into _output/bin/node):
#   containerd      containerd, ctr, containerd-shim-runc-v2 (hack/tools/containerd)
#   runc            with cgo and libseccomp, as runc's releases (hack/tools/runc;
#                   installs Debian's libseccomp-dev when missing)
#   cni-plugins     host-local, loopback, ptp, portmap (hack/tools/cni-plugins)
#   coredns         the DNS server of the node image's coredns image (hack/tools/coredns)
#
# Each tool set is a wrapper module of its own (a go.mod with `tool` lines and
# a complete go.sum), so the dependency graphs never mix and upstream's
# relative replace directives, which make `go install pkg@version` refuse
# etcd, do not matter. Builds are static (CGO_ENABLED=0), -trimpath and
# -mod=readonly; go.mod is never rewritten here (run `go mod tidy` in the
# wrapper module after changing a pin).
#
# Usage: tools.sh [etcd|kwok|kube-api-linter|registry|kind|benchstat|node|containerd|runc|cni-plugins|coredns]...
#   (default: all but the node image's; node = containerd runc cni-plugins coredns)
# Re-running is cheap (a few seconds): everything comes from Go's build cache,
# and `go build -o` does not rewrite a binary whose build ID is already current.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

TOOLS_DIR="${REPO_ROOT}/hack/tools"
ALL_TOOLS=(etcd kwok kube-api-linter registry kind)
NODE_TOOLS=(containerd runc cni-plugins coredns)

export GOWORK=off CGO_ENABLED=0
# The tools are shared by every release line (hack/tools/*/go.mod pins them):
# built with this machine's Go whatever LINE is, so that a line with a Go
# toolchain of its own (LINE_GOTOOLCHAIN) does not rebuild them.
export GOTOOLCHAIN=local

# tools::module_version DIR MODULE: the version of MODULE that DIR's go.mod selects.
tools::module_version() {
  go list -C "$1" -mod=readonly -m -f '{{.Version}}' "$2"
}

# tools::build DIR BINARY PACKAGE [GO BUILD FLAGS...]: builds PACKAGE (a main
# package of a dependency of the wrapper module DIR) into ${OUTPUT_BIN}/BINARY.
tools::build() {
  local dir="$1" name="$2" pkg="$3"
  shift 3
  local out="${OUTPUT_BIN}/${name}" before="" after=""
  mkdir -p "$(dirname "${out}")"
  # `go build -o` touches an up-to-date target without rewriting it, so the
  # mtime says nothing: compare checksums (`go tool buildid` is not shipped
  # prebuilt and would first be compiled into every new build cache).
  [[ -e "${out}" ]] && before="$(cksum <"${out}")"
  go build -C "${dir}" -mod=readonly -trimpath "$@" -o "${out}" "${pkg}" ||
    fatal "building ${name} (${pkg}) in ${dir} failed"
  after="$(cksum <"${out}")"
  if [[ "${before}" == "${after}" ]]; then
    log "  ${out}: up to date"
  else
    log "  ${out}: built"
  fi
}

tools::etcd() {
  local dir="${TOOLS_DIR}/etcd" version
  version="$(tools::module_version "${dir}" go.etcd.io/etcd/server/v3)"
  log "etcd ${version} (${dir#"${REPO_ROOT}/"})"
  tools::build "${dir}" etcd go.etcd.io/etcd/server/v3
  tools::build "${dir}" etcdctl go.etcd.io/etcd/etcdctl/v3
}

tools::kwok() {
  local dir="${TOOLS_DIR}/kwok" version
  version="$(tools::module_version "${dir}" sigs.k8s.io/kwok)"
  log "kwok ${version} (${dir#"${REPO_ROOT}/"})"
  # As kwok's hack/releases.sh stamps a release (VERSION from `git describe`).
  local ldflags="-X sigs.k8s.io/kwok/pkg/consts.Version=${version}"
  tools::build "${dir}" kwok sigs.k8s.io/kwok/cmd/kwok -ldflags="${ldflags}"
  tools::build "${dir}" kwokctl sigs.k8s.io/kwok/cmd/kwokctl -ldflags="${ldflags}"
}

tools::kube-api-linter() {
  local dir="${TOOLS_DIR}/kube-api-linter" version
  version="$(tools::module_version "${dir}" sigs.k8s.io/kube-api-linter)"
  log "kube-api-linter ${version} (${dir#"${REPO_ROOT}/"})"
  tools::build "${dir}" golangci-lint-kube-api-linter sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter
}

tools::registry() {
  local dir="${TOOLS_DIR}/registry" version
  version="$(tools::module_version "${dir}" github.com/distribution/distribution/v3)"
  log "registry ${version} (${dir#"${REPO_ROOT}/"})"
  # As distribution's Makefile stamps a release.
  local ldflags="-X github.com/distribution/distribution/v3/version.version=${version}"
  tools::build "${dir}" registry github.com/distribution/distribution/v3/cmd/registry -ldflags="${ldflags}"
}

tools::kind() {
  local dir="${TOOLS_DIR}/kind" version
  version="$(tools::module_version "${dir}" sigs.k8s.io/kind)"
  log "kind ${version} (${dir#"${REPO_ROOT}/"})"
  tools::build "${dir}" kind sigs.k8s.io/kind
}

tools::containerd() {
  local dir="${TOOLS_DIR}/containerd" version b
  version="$(tools::module_version "${dir}" github.com/containerd/containerd/v2)"
  log "containerd ${version} (${dir#"${REPO_ROOT}/"})"
  # As containerd's Makefile stamps a release; kind's base image builds
  # these tags out too.
  local ldflags="-X github.com/containerd/containerd/v2/version.Version=${version} -X github.com/containerd/containerd/v2/version.Revision=${version}"
  for b in containerd ctr containerd-shim-runc-v2; do
    tools::build "${dir}" "node/${b}" "github.com/containerd/containerd/v2/cmd/${b}" \
      -tags "no_aufs no_zfs no_btrfs no_devmapper" -ldflags="${ldflags}"
  done
}

tools::runc() {
  local dir="${TOOLS_DIR}/runc" version
  version="$(tools::module_version "${dir}" github.com/opencontainers/runc)"
  log "runc ${version} (${dir#"${REPO_ROOT}/"})"
  if ! pkg-config --exists libseccomp 2>/dev/null; then
    log "installing Debian's libseccomp-dev and pkg-config (runc is built with seccomp)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libseccomp-dev pkg-config >/dev/null ||
      fatal "apt-get install libseccomp-dev pkg-config failed"
  fi
  CGO_ENABLED=1 tools::build "${dir}" node/runc github.com/opencontainers/runc \
    -tags seccomp -ldflags="-X main.version=${version#v}"
}

tools::cni-plugins() {
  local dir="${TOOLS_DIR}/cni-plugins" version p
  version="$(tools::module_version "${dir}" github.com/containernetworking/plugins)"
  log "CNI plugins ${version} (${dir#"${REPO_ROOT}/"})"
  for p in ipam/host-local main/loopback main/ptp meta/portmap; do
    tools::build "${dir}" "node/cni/${p##*/}" "github.com/containernetworking/plugins/plugins/${p}" \
      -ldflags="-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=${version}"
  done
}

tools::benchstat() {
  local dir="${TOOLS_DIR}/benchstat" version
  version="$(tools::module_version "${dir}" golang.org/x/perf)"
  log "benchstat ${version} (${dir#"${REPO_ROOT}/"})"
  tools::build "${dir}" benchstat golang.org/x/perf/cmd/benchstat
}

tools::coredns() {
  local dir="${TOOLS_DIR}/coredns" version
  version="$(tools::module_version "${dir}" github.com/coredns/coredns)"
  log "CoreDNS ${version} (${dir#"${REPO_ROOT}/"})"
  tools::build "${dir}" node/coredns github.com/coredns/coredns
}

selected=("$@")
[[ ${#selected[@]} -gt 0 ]] || selected=("${ALL_TOOLS[@]}")
expanded=()
for t in "${selected[@]}"; do
  case "${t}" in
    node) expanded+=("${NODE_TOOLS[@]}") ;;
    etcd | kwok | kube-api-linter | registry | kind | benchstat | containerd | runc | cni-plugins | coredns) expanded+=("${t}") ;;
    *) fatal "unknown tool '${t}' (want one of: ${ALL_TOOLS[*]} benchstat ${NODE_TOOLS[*]} node)" ;;
  esac
done
selected=("${expanded[@]}")

mkdir -p "${OUTPUT_BIN}"
for t in "${selected[@]}"; do
  "tools::${t}"
done
