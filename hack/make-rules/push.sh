#!/usr/bin/env bash
# make push REGISTRY=HOST[:PORT][/PATH]: pushes every image `make images`
# wrote (IMAGES_OUT/oci, default _output/images/oci) to
# REGISTRY/<repository>:<fork version>, e.g. REGISTRY/kube-apiserver:vX.Y.Z-guard.N,
# then reads each back from the registry and compares digests. Credentials
# come from the docker config (~/.docker/config.json, DOCKER_CONFIG), as
# `docker push` uses them; a registry on localhost or 127.0.0.1 is spoken to
# over plain HTTP. The kind node image of `make node-image`
# (_output/node/oci) goes along when there is one, as REGISTRY/kube-guard/node:<version>.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
line::require_default "make push"

IMAGES_OUT="${IMAGES_OUT:-${OUTPUT_DIR}/images}"
[[ -n "${REGISTRY:-}" ]] || fatal "REGISTRY is not set: make push REGISTRY=HOST[:PORT][/PATH]"
[[ -f "${IMAGES_OUT}/oci/index.json" ]] || fatal "${IMAGES_OUT}/oci is not an OCI layout: run make images first"
go build -C "${REPO_ROOT}" -o "${OUTPUT_BIN}/imagebuild" ./hack/imagebuild
log "pushing $(wc -l <"${IMAGES_OUT}/images.txt") images to ${REGISTRY}"
"${OUTPUT_BIN}/imagebuild" push -layout "${IMAGES_OUT}/oci" -registry "${REGISTRY}"
# The kind node image too, when `make node-image` made one (NODE_OCI=none skips it).
NODE_OCI="${NODE_OCI:-${OUTPUT_DIR}/node/oci}"
if [[ "${NODE_OCI}" != "none" && -f "${NODE_OCI}/index.json" ]]; then
  log "pushing the kind node image to ${REGISTRY}"
  "${OUTPUT_BIN}/imagebuild" push -layout "${NODE_OCI}" -registry "${REGISTRY}"
fi
