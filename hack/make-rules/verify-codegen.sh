#!/usr/bin/env bash
# Checks that the generated files and fixtures of a component's materialised
# tree are what upstream's generators make of its sources: runs the
# component's codegen hook (hack/make-rules/codegen.sh) in the tree and fails,
# listing the files, when `git status --porcelain` there is not empty
# afterwards. On an untouched base tree this proves that the generators run
# offline and reproduce upstream's files byte for byte; with the series
# applied it catches a patch that changed API types or feature gates without
# regenerating.
#
# The tree must be clean first. The checkout (this repository) is never
# changed; in the tree, what the generators changed is put back afterwards
# unless KEEP_CODEGEN_DIFF=1 (then `git -C <tree> diff` shows it).
#
# Usage: verify-codegen.sh COMPONENT [STEP...]   (default: all)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

component::load "${1:?usage: verify-codegen.sh COMPONENT [STEP...]}"
shift
[[ -f "${REPO_ROOT}/build/${COMPONENT_NAME}/codegen.sh" ]] || { log "${COMPONENT_NAME}: no codegen hook, nothing to verify"; exit 0; }
[[ -e "${COMPONENT_TREE}/.git" ]] || fatal "${COMPONENT_TREE} is not materialised: run 'make apply COMPONENT=${COMPONENT_NAME}' first"

dirty="$(component::git status --porcelain)"
if [[ -n "${dirty}" ]]; then
  printf '%s\n' "${dirty}" >&2
  fatal "${COMPONENT_TREE} is not clean before regenerating: commit or discard these first"
fi

head="$(component::git rev-parse --short HEAD)"
start="$(date +%s)"
CODEGEN_GENERATORS='' "${REPO_ROOT}/hack/make-rules/codegen.sh" "${COMPONENT_NAME}" "$@"

changed="$(component::git status --porcelain)"
if [[ -n "${changed}" ]]; then
  printf '%s\n' "${changed}" >&2
  component::git diff --stat=120 | tail -n 1 >&2
  if [[ "${KEEP_CODEGEN_DIFF:-0}" != 1 ]]; then
    component::git checkout --quiet -- .
    component::git clean --quiet -fd -e /_output -e /third_party -e /vendor
  fi
  fatal "regenerating changed $(wc -l <<<"${changed}") path(s) in ${COMPONENT_TREE} (HEAD ${head}): commit them into the patch that changed the sources (KEEP_CODEGEN_DIFF=1 keeps them in the tree)"
fi
log "verify-codegen: ${COMPONENT_NAME} at ${head}: no diff after regenerating (${*:-all}; $(($(date +%s) - start))s)"
