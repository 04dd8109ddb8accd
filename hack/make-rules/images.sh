#!/usr/bin/env bash
# make images: the container images of build/images/images.yaml, built
# without a container daemon (hack/imagebuild, go-containerregistry) from the
# binaries in _output/bin and base layers made here from Debian packages:
#   1. the binaries the images hold, of the components of the release line
#      LINE (default: the newest; hack/make-rules/build.sh; SKIP_BUILD=1
#      uses the line's binaries, _output/bin or _output/bin/<line>, as they are);
#   2. the Debian packages of build/images/debian.lock, downloaded once into
#      a cache (KUBE_GUARD_DEB_CACHE, default ~/.cache/kube-guard/debs, by
#      SHA-256) and checked against the lock;
#   3. extracted per base (static, iptables) under ${IMAGES_OUT}.rootfs/;
#   4. imagebuild build: IMAGES_OUT (default _output/images; an older
#      line's _output/images-<line>) gets
#      <image>.tar (docker load), oci/ (OCI layout), images.txt (tag and
#      digest of each image) and kubernetes-server-linux-amd64.tar.gz.
# Tags carry each component's fork version; every timestamp is the
# SOURCE_DATE_EPOCH of the component's tree, so the same binaries give the
# same digests. Output is written beside IMAGES_OUT and moved into place: an
# interrupted run leaves the previous images, and a rerun starts over.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/version.sh"

IMAGES_OUT="${IMAGES_OUT:-$(line::images)}"
DEB_CACHE="${KUBE_GUARD_DEB_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/kube-guard/debs}"
LOCK="${REPO_ROOT}/build/images/debian.lock"
SPEC="${REPO_ROOT}/build/images/images.yaml"

# The line's components (a line without a descheduler has no descheduler image).
mapfile -t components < <(component::all)
if [[ "${SKIP_BUILD:-0}" != "1" ]]; then
  "${REPO_ROOT}/hack/make-rules/build.sh" "${components[@]}"
fi

command -v dpkg-deb >/dev/null || fatal "dpkg-deb not found: the base layers are extracted from Debian packages (apt-get install dpkg)"
command -v curl >/dev/null || fatal "curl not found (apt-get install curl)"

# deb::fetch FILE URL SIZE SHA256: prints the cached .deb's path, downloading
# it first if the cache lacks it.
deb::fetch() {
  local file="$1" url="$2" size="$3" sum="$4" cached tmp
  cached="${DEB_CACHE}/${sum}.deb"
  if [[ -f "${cached}" ]] && [[ "$(sha256sum "${cached}" | cut -d' ' -f1)" == "${sum}" ]]; then
    printf '%s\n' "${cached}"
    return
  fi
  mkdir -p "${DEB_CACHE}"
  tmp="$(mktemp "${DEB_CACHE}/.download.XXXXXX")"
  if ! curl -fsSL --retry 3 -o "${tmp}" "${url}"; then
    rm -f "${tmp}"
    fatal "downloading ${file} from ${url} failed; if Debian removed this version, resolve newer ones with hack/make-rules/update/debian-lock.sh"
  fi
  if [[ "$(stat -c %s "${tmp}")" != "${size}" || "$(sha256sum "${tmp}" | cut -d' ' -f1)" != "${sum}" ]]; then
    rm -f "${tmp}"
    fatal "${url}: not the ${size}-byte file with SHA-256 ${sum} that build/images/debian.lock names"
  fi
  mv "${tmp}" "${cached}"
  printf '%s\n' "${cached}"
}

[[ -s "${LOCK}" ]] || fatal "${LOCK} is missing: run hack/make-rules/update/debian-lock.sh"
rootfs="${IMAGES_OUT}.rootfs"
rm -rf "${rootfs}"
n=0
while read -r layer file url size sum; do
  [[ -n "${layer}" && "${layer}" != \#* ]] || continue
  [[ -n "${sum}" ]] || fatal "${LOCK}: malformed line for ${file}"
  deb="$(deb::fetch "${file}" "${url}" "${size}" "${sum}")"
  mkdir -p "${rootfs}/${layer}"
  dpkg-deb --fsys-tarfile "${deb}" | tar -x --no-same-owner -p -C "${rootfs}/${layer}" ||
    fatal "extracting ${deb} (${file}) failed"
  n=$((n + 1))
done <"${LOCK}"
log "${n} Debian packages extracted under ${rootfs#"${REPO_ROOT}/"} (cache: ${DEB_CACHE})"
# The node image's own images use the same bases (hack/make-rules/node-image.sh).
[[ "${IMAGES_ONLY_ROOTFS:-0}" != "1" ]] || exit 0

args=(build -spec "${SPEC}" -bin "$(line::bin)" -rootfs "${rootfs}" -out "${IMAGES_OUT}"
  -components "$(IFS=,; echo "${components[*]}")")
for c in "${components[@]}"; do
  read -r version epoch commit < <(version::of "${c}")
  args+=(-version "${c}=${version}" -epoch "${c}=${epoch}" -commit "${c}=${commit}")
done

go build -C "${REPO_ROOT}" -o "${OUTPUT_BIN}/imagebuild" ./hack/imagebuild
log "building the images into ${IMAGES_OUT#"${REPO_ROOT}/"}"
"${OUTPUT_BIN}/imagebuild" "${args[@]}"
rm -rf "${rootfs}"
log "images: $(wc -l <"${IMAGES_OUT}/images.txt") in ${IMAGES_OUT#"${REPO_ROOT}/"} ($(du -sh "${IMAGES_OUT}" | cut -f1))"
