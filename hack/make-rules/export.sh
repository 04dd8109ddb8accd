#!/usr/bin/env bash
# Writes the commits on top of base/<version> in the materialised tree back
# into patches/<component>/<line>/<topic>/, each by its "Topic:" trailer, in a
# reproducible format (see component::export_series). Materialise, apply and
# export leave patches/ byte-identical. The topics list and each TOPIC.md are
# written by hand; a commit of a topic the list lacks is refused.
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
component::export_series "${tmp}"
mkdir -p "${COMPONENT_PATCHES}"
find "${COMPONENT_PATCHES}" -mindepth 1 -maxdepth 2 -type f -name '*.patch' -delete
for d in "${tmp}"/*/; do
  [[ -d "${d}" ]] || continue
  t="$(basename "${d}")"
  mkdir -p "${COMPONENT_PATCHES}/${t}"
  mv "${d}"*.patch "${COMPONENT_PATCHES}/${t}/"
  [[ -f "${COMPONENT_PATCHES}/${t}/TOPIC.md" ]] || log "$(component::rel_patches)/${t}/TOPIC.md is missing: write it (docs/development.md says what it holds)"
done
component::record_sync
log "exported $(component::series_files | wc -l) patches in $(component::topics | wc -l) topics to $(component::rel_patches)"
