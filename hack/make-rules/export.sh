#!/usr/bin/env bash
# Writes the commits on top of base/<version> in the materialised tree back
# into patches/<component>/ in a reproducible format (see
# component::format_patches). Materialise, apply and export leave patches/
# byte-identical.
#
# Usage: export.sh [component]   (default: kubernetes)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

component::load "${1:-kubernetes}"
component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run 'make apply' first"
if [[ -n "$(component::git status --porcelain --untracked-files=no)" ]]; then
  fatal "${COMPONENT_TREE} has uncommitted edits: commit them in that tree first (one logical change per commit)"
fi
if ! component::git merge-base --is-ancestor "${COMPONENT_BASE_TAG}" HEAD; then
  fatal "${COMPONENT_TREE}: HEAD does not descend from ${COMPONENT_BASE_TAG}"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
component::format_patches "${tmp}"
mkdir -p "${COMPONENT_PATCHES}"
find "${COMPONENT_PATCHES}" -maxdepth 1 -type f -name '*.patch' -delete
find "${tmp}" -maxdepth 1 -type f -name '*.patch' -exec mv {} "${COMPONENT_PATCHES}/" \;
component::record_sync
log "exported $(component::series_files | wc -l) patches to patches/${COMPONENT_NAME}"
