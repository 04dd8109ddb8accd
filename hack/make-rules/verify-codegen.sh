#!/usr/bin/env bash
# Checks that the generated files and fixtures of the materialised tree
# ${OUTPUT_SRC}/kubernetes are what upstream's generators make of its sources:
# runs codegen.sh (default: all) in the tree and fails, listing the files, when
# `git status --porcelain` there is not empty afterwards. On the untouched base
# tree this proves that the generators run offline and reproduce upstream's
# files byte for byte; with patches/kubernetes applied it catches a patch that
# changed API types or feature gates without regenerating.
#
# The tree must be clean first (commit or discard edits there). Nothing is
# restored afterwards: the changed files stay in the tree for inspection
# (`git -C ${OUTPUT_SRC}/kubernetes diff`).
#
# Usage: verify-codegen.sh [codegen.sh steps...]   (default: all)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

component::load kubernetes
component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run hack/make-rules/materialize.sh first"

dirty="$(component::git status --porcelain)"
if [[ -n "${dirty}" ]]; then
  printf '%s\n' "${dirty}" >&2
  fatal "${COMPONENT_TREE} is not clean before regenerating: commit or discard these first"
fi

head="$(component::git rev-parse --short HEAD)"
start="$(date +%s)"
CODEGEN_GENERATORS= "${REPO_ROOT}/hack/make-rules/codegen.sh" "$@"

changed="$(component::git status --porcelain)"
if [[ -n "${changed}" ]]; then
  printf '%s\n' "${changed}" >&2
  component::git diff --stat=120 | tail -n 1 >&2
  fatal "regenerating changed $(wc -l <<<"${changed}") path(s) in ${COMPONENT_TREE} (HEAD ${head}): see above, and git diff there"
fi
log "verify-codegen: ${COMPONENT_TREE} at ${head}: no diff after regenerating (${*:-all}; $(($(date +%s) - start))s)"
