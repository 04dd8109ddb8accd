#!/usr/bin/env bash
# make node-image: the kind node image kube-guard/node:<kubernetes fork
# version>, for `kind create cluster --image ...` (docs/kind.md), built here
# without a registry and without `kind build node-image` (which pulls images):
#   1. a Debian root file system (mmdebstrap, build/node/packages.env),
#      kept in _output/node/rootfs-<hash>.tar until the package list changes;
#   2. the binaries (kubelet, kubeadm, kubectl and the control plane; the
#      pinned containerd, runc, CNI plugins, CoreDNS and etcd; agnhost; pause
#      from upstream's build/pause) and the release images (`make images`);
#      SKIP_BUILD=1 uses _output/bin and _output/images as they are;
#   3. the images kubeadm, kind and the e2e need besides the control plane
#      (pause, etcd, CoreDNS, agnhost: build/images/images.yaml, set node),
#      tagged as `kubeadm config images list` and upstream's e2e name them;
#   4. kind's base image files (sigs.k8s.io/kind, as pinned), the binaries,
#      build/node/files (image preload and pod network services, kind
#      manifests) and /kind/images/*.tar, over it, in one layer
#      (hack/imagebuild node), as _output/node/node-image.tar and, for
#      `make push`, the OCI layout _output/node/oci;
#   5. loaded into the docker engine (hack/lib/docker.sh starts one if needed).
# LINE=<line> builds the node image of that release line, from its binaries
# (_output/bin/<line>) and images (_output/images-<line>), into
# _output/node/<line>/. The pinned etcd and CoreDNS are the newest line's
# (hack/tools): an older line's kubeadm may name other releases of them; the
# node image then tags them as what they are, and writes the tags that differ
# from kubeadm's in /kind/kube-guard/image-tags ("etcd <tag>", "coredns
# <tag>"; empty when none does), which `make kind-up` gives kubeadm
# (etcd.local.imageTag, dns.imageTag).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/version.sh"
source "${REPO_ROOT}/hack/lib/docker.sh"

# The root file system's cache is shared by the lines; what is made of a
# line's binaries goes to NODE_OUT.
NODE_DIR="${OUTPUT_DIR}/node"
NODE_BIN="${OUTPUT_BIN}/node"
KUBE_BIN="$(line::bin)"
line="$(line::selected)"
NODE_OUT="$(line::path "${NODE_DIR}" /)"
newest=0
[[ "${line}" != "$(line::default)" ]] || newest=1
mkdir -p "${NODE_DIR}" "${NODE_BIN}" "${NODE_OUT}"

# The version and date of the image: the patched tree's (applied first).
[[ "${SKIP_BUILD:-0}" == "1" ]] || "${REPO_ROOT}/hack/make-rules/apply.sh" kubernetes

read -r version epoch _ < <(version::of kubernetes)
component::load kubernetes
tree="${COMPONENT_TREE}"

# The root file system, made again only when the package list changes.
# shellcheck source=build/node/packages.env
source "${REPO_ROOT}/build/node/packages.env"
read -ra packages <<<"$(tr -s ' \n' ' ' <<<"${NODE_DEBIAN_PACKAGES}")"
key="$(printf '%s\n' "${NODE_DEBIAN_SUITE}" "${packages[@]}" | sha256sum | cut -c1-12)"
rootfs="${NODE_DIR}/rootfs-${key}.tar"
if [[ ! -f "${rootfs}" ]] || [[ ! -s "${rootfs}" ]]; then
  command -v mmdebstrap >/dev/null || {
    log "installing Debian's mmdebstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null || fatal "apt-get install mmdebstrap failed"
  }
  log "making the ${NODE_DEBIAN_SUITE} root file system (${#packages[@]} packages and their dependencies; a few minutes)"
  rm -rf "${NODE_DIR}"/rootfs-*  # older package lists, an interrupted run
  SOURCE_DATE_EPOCH="${epoch}" mmdebstrap --verbose --mode=root --format=tar --variant=minbase \
    --include="$(IFS=,; echo "${packages[*]}")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='mkdir -p "$1/kind" && chroot "$1" dpkg-query -W -f "\${Package} \${Version}\n" > "$1/kind/debian-packages.txt"' \
    "${NODE_DEBIAN_SUITE}" "${rootfs}.tmp" http://deb.debian.org/debian >"${NODE_DIR}/mmdebstrap.log" 2>&1 ||
    fatal "mmdebstrap failed (log: ${NODE_DIR}/mmdebstrap.log)"
  mv "${rootfs}.tmp" "${rootfs}"
fi

if [[ "${SKIP_BUILD:-0}" != "1" ]]; then
  mapfile -t components < <(component::all)
  "${REPO_ROOT}/hack/make-rules/build.sh" "${components[@]}" agnhost
  "${REPO_ROOT}/hack/make-rules/tools.sh" etcd kind node
  SKIP_BUILD=1 "${REPO_ROOT}/hack/make-rules/images.sh"
fi
images_dir="$(line::images)"
[[ -f "${images_dir}/images.txt" ]] || fatal "no release images in ${images_dir}: run make images$(line::hint)"

for b in kubelet kubeadm kubectl agnhost; do
  [[ -x "${KUBE_BIN}/${b}" ]] || fatal "${KUBE_BIN}/${b} is missing: run make node-image$(line::hint) without SKIP_BUILD"
done
for b in etcd etcdctl node/containerd node/ctr node/containerd-shim-runc-v2 node/runc node/coredns \
  node/cni/host-local node/cni/loopback node/cni/ptp node/cni/portmap; do
  [[ -x "${OUTPUT_BIN}/${b}" ]] || fatal "${OUTPUT_BIN}/${b} is missing: run make node-image without SKIP_BUILD"
done

# What kubeadm pulls for this version: the tags of the node's own images.
mapfile -t kubeadm_images < <("${KUBE_BIN}/kubeadm" config images list --kubernetes-version "${version}")
tag_of() {
  local i
  for i in "${kubeadm_images[@]}"; do
    [[ "${i}" != "registry.k8s.io/$1:"* ]] || { echo "${i##*:}"; return; }
  done
  fatal "kubeadm config images list names no registry.k8s.io/$1: ${kubeadm_images[*]}"
}
pause_tag="$(tag_of pause)"
etcd_tag="$(tag_of etcd)"
coredns_tag="$(tag_of coredns/coredns)"
# The pinned etcd and CoreDNS must be the releases the newest line's kubeadm
# asks for (upstream's etcd image tags are <etcd version>-<image revision>).
# An older line's kubeadm may ask for older ones: the image carries the
# pinned ones, tagged as what they are, and names the tags for kind-up.
image_tags=""
etcd_version="$("${OUTPUT_BIN}/etcd" --version | sed -n 's/^etcd Version: //p')"
coredns_version="$(go list -C "${REPO_ROOT}/hack/tools/coredns" -mod=readonly -m -f '{{.Version}}' github.com/coredns/coredns)"
if [[ "${etcd_tag}" != "${etcd_version}-"* ]]; then
  ((newest == 0)) || fatal "kubeadm wants etcd ${etcd_tag}, the pinned etcd is ${etcd_version} (hack/tools/etcd)"
  log "line ${line}'s kubeadm asks for etcd ${etcd_tag}; the node image carries the pinned etcd ${etcd_version} as ${etcd_version}-0 (make kind-up tells kubeadm)"
  etcd_tag="${etcd_version}-0"
  image_tags+="etcd ${etcd_tag}"$'\n'
fi
if [[ "${coredns_tag}" != "${coredns_version}" ]]; then
  ((newest == 0)) || fatal "kubeadm wants CoreDNS ${coredns_tag}, the pinned CoreDNS is ${coredns_version} (hack/tools/coredns)"
  log "line ${line}'s kubeadm asks for CoreDNS ${coredns_tag}; the node image carries the pinned CoreDNS ${coredns_version} (make kind-up tells kubeadm)"
  coredns_tag="${coredns_version}"
  image_tags+="coredns ${coredns_tag}"$'\n'
fi
grep -q "^TAG ?= ${pause_tag}\$" "${tree}/build/pause/Makefile" ||
  fatal "kubeadm wants pause ${pause_tag}, upstream's build/pause/Makefile builds another"

# agnhost: tagged as upstream's e2e names it (test/utils/image/manifest.go).
agnhost_tag="$(sed -n 's/.*configs\[Agnhost\] = Config{[^,]*, "agnhost", "\([^"]*\)"}.*/\1/p' "${tree}/test/utils/image/manifest.go")"
[[ "${agnhost_tag}" == "$(cat "${tree}/test/images/agnhost/VERSION")" ]] ||
  fatal "upstream's e2e wants agnhost '${agnhost_tag}', test/images/agnhost/VERSION builds $(cat "${tree}/test/images/agnhost/VERSION")"

log "pause ${pause_tag} from ${tree#"${REPO_ROOT}/"}/build/pause"
command -v gcc >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null
# As upstream's build/pause/Makefile (CFLAGS), with our version in place of its git describe.
gcc -Os -Wall -Werror -static -DVERSION="v${pause_tag}-kube-guard" -o "${NODE_BIN}/pause" "${tree}/build/pause/linux/pause.c"

go build -C "${REPO_ROOT}" -o "${OUTPUT_BIN}/imagebuild" ./hack/imagebuild
# The node set shares the bases of the release images: extract the Debian
# packages again the way images.sh does (IMAGES_ONLY_ROOTFS=1 stops there).
IMAGES_OUT="${NODE_OUT}/images" IMAGES_ONLY_ROOTFS=1 SKIP_BUILD=1 "${REPO_ROOT}/hack/make-rules/images.sh"
# The node set's binaries: the shared tools, and the line's agnhost.
node_set_bin="${NODE_OUT}/node-set-bin"
rm -rf "${node_set_bin}"
mkdir -p "${node_set_bin}"
ln -s "${NODE_BIN}" "${node_set_bin}/node"
ln -s "${OUTPUT_BIN}/etcd" "${OUTPUT_BIN}/etcdctl" "${KUBE_BIN}/agnhost" "${node_set_bin}/"
"${OUTPUT_BIN}/imagebuild" build -set node -spec "${REPO_ROOT}/build/images/images.yaml" -bin "${node_set_bin}" \
  -rootfs "${NODE_OUT}/images.rootfs" -out "${NODE_OUT}/images" \
  -version "pause=${pause_tag}" -version "etcd=${etcd_tag}" -version "coredns=${coredns_tag}" -version "agnhost=${agnhost_tag}" \
  -epoch "pause=${epoch}" -epoch "etcd=${epoch}" -epoch "coredns=${epoch}" -epoch "agnhost=${epoch}"
rm -rf "${NODE_OUT}/images.rootfs" "${node_set_bin}"

# The files over it.
kind_dir="$(go list -C "${REPO_ROOT}/hack/tools/kind" -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/kind)"
[[ -d "${kind_dir}/images/base/files" ]] || fatal "kind's base image files are not in ${kind_dir}"
overlay="${NODE_OUT}/overlay"
rm -rf "${overlay}"
mkdir -p "${overlay}"
cp -a "${kind_dir}/images/base/files/." "${overlay}/"
chmod -R u+w "${overlay}"
chmod 0755 "${overlay}/usr/local/bin/"* "${overlay}/kind/bin/"*
cp -a "${REPO_ROOT}/build/node/files/." "${overlay}/"
# The module zip drops exec bits; these are kind's and our scripts.
chmod 0755 "${overlay}/usr/local/bin/"* "${overlay}/kind/bin/"*
# kind's containerd config, with the pause image kubeadm names, and
# oom_score_adj kept at or above containerd's own (negative values are
# refused in some sandboxes).
sed -i -e "s#sandbox_image = \"registry.k8s.io/pause:[^\"]*\"#sandbox_image = \"registry.k8s.io/pause:${pause_tag}\"#" \
  -e 's#restrict_oom_score_adj = false#restrict_oom_score_adj = true#' "${overlay}/etc/containerd/config.toml"
grep -q "pause:${pause_tag}\"" "${overlay}/etc/containerd/config.toml" || fatal "kind's containerd config names no sandbox_image to set"
install -D -m 0755 "${NODE_BIN}/containerd" "${NODE_BIN}/ctr" "${NODE_BIN}/containerd-shim-runc-v2" -t "${overlay}/usr/local/bin/"
install -D -m 0755 "${NODE_BIN}/runc" -t "${overlay}/usr/local/sbin/"
install -D -m 0755 "${NODE_BIN}/cni/host-local" "${NODE_BIN}/cni/loopback" "${NODE_BIN}/cni/ptp" "${NODE_BIN}/cni/portmap" -t "${overlay}/opt/cni/bin/"
install -D -m 0755 "${KUBE_BIN}/kubelet" "${KUBE_BIN}/kubeadm" "${KUBE_BIN}/kubectl" -t "${overlay}/usr/bin/"
# As kind's Dockerfile: the base OCI spec of containerd's runc runtime.
"${NODE_BIN}/ctr" oci spec |
  jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
  jq 'del(.process.rlimits)' >"${overlay}/etc/containerd/cri-base.json"
mkdir -p "${overlay}/etc/kubernetes/manifests" "${overlay}/etc/systemd/journald.conf.d" "${overlay}/etc/systemd/system/multi-user.target.wants" "${overlay}/kind/images"
printf '[Journal]\nReadKMsg=no\n' >"${overlay}/etc/systemd/journald.conf.d/kind.conf"
for unit in containerd kubelet undo-mount-hacks kube-guard-preload kube-guard-cni; do
  ln -s "/etc/systemd/system/${unit}.service" "${overlay}/etc/systemd/system/multi-user.target.wants/${unit}.service"
done
ln -s /dev/null "${overlay}/etc/systemd/system/systemd-binfmt.service"
printf '%s' "${version}" >"${overlay}/kind/version"
mkdir -p "${overlay}/kind/kube-guard"
printf '%s' "${image_tags}" >"${overlay}/kind/kube-guard/image-tags"
cp "${images_dir}"/*.tar "${NODE_OUT}"/images/*.tar "${overlay}/kind/images/"

tag="kube-guard/node:${version}"
log "assembling ${tag}"
"${OUTPUT_BIN}/imagebuild" node -rootfs "${rootfs}" -overlay "${overlay}" -tag "${tag}" -epoch "${epoch}" \
  -out "${NODE_OUT}/node-image.tar" -layout "${NODE_OUT}/oci" \
  -drop 'dev/*' -drop 'lib/systemd/system/multi-user.target.wants/*' -drop 'etc/systemd/system/*.wants/*' \
  -drop 'lib/systemd/system/local-fs.target.wants/*' -drop 'lib/systemd/system/basic.target.wants/*' \
  -drop 'lib/systemd/system/sockets.target.wants/*udev*' -drop 'lib/systemd/system/sockets.target.wants/*initctl*' \
  -drop 'lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service'
rm -rf "${overlay}"

docker::ensure
docker load -i "${NODE_OUT}/node-image.tar" >/dev/null
log "${tag}: $(docker image inspect --format '{{.Size}}' "${tag}" | numfmt --to=iec) in docker (archive: ${NODE_OUT#"${REPO_ROOT}/"}/node-image.tar)"
