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
# A clean run of every step (no STEP given) records nothing by itself;
# hack/make-rules/update/codegen-verified.sh runs this script and then writes
# the key of what it checked (codegen::key below: the tree's sources, the
# component's codegen hook, these scripts, the Go version) into
# patches/<component>/<line>/codegen.verified. With CODEGEN_TRUST_RECORDED=1
# (make test sets it), a line whose key is the one recorded is not
# regenerated again: the generators already ran clean on exactly these
# inputs. Any change to the line's series, its pin, the hook or these scripts
# changes the key, and then the generators run as always; so does every line
# under `make verify`.
#
# Usage: verify-codegen.sh COMPONENT [STEP...]   (default: all)
#        verify-codegen.sh --key COMPONENT     (prints the key of the tree as it is)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

# codegen::key: what the generators' output depends on, as one sha256: the
# tree at HEAD (its git tree id: upstream's sources, the overlay and the
# series; not the commit messages), the tree of the component whose staging
# modules it builds against (STAGING_FROM: the generators may come from
# there), the component's codegen hook, this script,
# hack/make-rules/codegen.sh and the Go toolchain.
codegen::key() {
  local from
  from="$(component::setting "${COMPONENT_NAME}" STAGING_FROM)"
  {
    echo "tree $(component::git rev-parse 'HEAD^{tree}')"
    [[ -z "${from}" ]] || echo "staging from ${from}: $(component::load "${from}" && component::git rev-parse 'HEAD^{tree}')"
    echo "go $(go env GOVERSION)"
    (cd "${REPO_ROOT}" && sha256sum "build/${COMPONENT_NAME}/codegen.sh" hack/make-rules/codegen.sh hack/make-rules/verify-codegen.sh)
  } | sha256sum | cut -d' ' -f1
}

key_only=0
if [[ "${1:-}" == --key ]]; then
  key_only=1
  shift
fi
component::load "${1:?usage: verify-codegen.sh [--key] COMPONENT [STEP...]}"
shift
[[ -f "${REPO_ROOT}/build/${COMPONENT_NAME}/codegen.sh" ]] || { log "${COMPONENT_NAME}: no codegen hook, nothing to verify"; exit 0; }
[[ -e "${COMPONENT_TREE}/.git" ]] || fatal "${COMPONENT_TREE} is not materialised: run 'make apply COMPONENT=${COMPONENT_NAME}' first"

dirty="$(component::git status --porcelain)"
if [[ -n "${dirty}" ]]; then
  printf '%s\n' "${dirty}" >&2
  fatal "${COMPONENT_TREE} is not clean before regenerating: commit or discard these first"
fi

head="$(component::git rev-parse --short HEAD)"
key="$(codegen::key)"
if [[ "${key_only}" == 1 ]]; then
  echo "${key}"
  exit 0
fi
stamp="${COMPONENT_PATCHES}/codegen.verified"
recorded="$(grep -v '^#' "${stamp}" 2>/dev/null | head -n 1 || true)"
shown="${recorded:0:12}"
# Trust a record only for a run of every step, and only when asked to.
trusting=0
[[ $# -gt 0 || "${CODEGEN_TRUST_RECORDED:-0}" != 1 ]] || trusting=1
if [[ "${trusting}" == 1 ]]; then
  if [[ "${recorded}" == "${key}" ]]; then
    log "verify-codegen: ${COMPONENT_NAME} line ${COMPONENT_LINE} at ${head}: its generators ran clean on exactly these inputs ($(component::rel_patches)/codegen.verified: ${key:0:12}); not regenerated (make verify does)"
    exit 0
  fi
  log "verify-codegen: ${COMPONENT_NAME} line ${COMPONENT_LINE}: inputs ${key:0:12} are not the ones recorded in $(component::rel_patches)/codegen.verified (${shown:-nothing}); regenerating"
fi
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
if [[ "${trusting}" == 1 ]]; then
  log "verify-codegen: $(component::rel_patches)/codegen.verified does not record these inputs: 'make update-codegen-verified LINE=${COMPONENT_LINE}' records them, so that make test need not regenerate this line again"
fi
