#!/usr/bin/env bash
# Ports a component that consumes the k8s.io/* staging modules (one whose
# component.env sets STAGING_FROM, e.g. STAGING_FROM=kubernetes for the
# descheduler) onto OUR patched staging modules: writes
# build/<component>/overlay/go.mod and go.sum, which materialize.sh copies
# into the component's base/<version> commit. So the component compiles
# against the patched API (e.g. PodSpec with our fields), not against the
# releases its upstream go.mod names.
#
# Starting from upstream's go.mod (the module zip of the pinned version):
#   - every k8s.io/<name> in the module graph that is a staging module of the
#     STAGING_FROM tree (its go.work) is required at that component's
#     STAGING_VERSION and replaced by ../<STAGING_FROM>/staging/src/k8s.io/<name>;
#     relative, so the base commit is the same whatever OUTPUT_DIR is (the
#     materialised trees are siblings under _output/src);
#   - k8s.io/kube-openapi is replaced by the version the STAGING_FROM tree's
#     go.mod requires (upstream's descheduler replaces it because a dependency
#     requires the bogus tag v0.31.0, which would win over every pseudo-version;
#     a replace only holds in the main module, so a module that imports the
#     descheduler must repeat it);
#   - `go mod tidy` (module proxy) completes go.mod and go.sum.
# This repeats until the set of replaced modules stops growing (a newer staging
# module may bring in another one). Any other file in the overlay (a build fix)
# is in place while tidying.
#
# The STAGING_FROM tree is used as it is (materialised and patched first by
# apply.sh when missing). The overlay is written under TARGET_ROOT (default:
# this repository; verify/staging-replaces.sh passes a copy and compares).
#
# Each release line of the component has its own: the default line's is
# build/<component>/overlay, another line's patches/<component>/<line>/overlay
# (copied over the former by materialize.sh), with its replaces pointing at
# that line's STAGING_FROM tree (../kubernetes-<line>/staging/src/k8s.io/...)
# and its requirements at that line's staging version, tidied with that
# line's Go toolchain.
#
# Usage: update/staging-replaces.sh [component...]
#        (default: every component whose component.env sets STAGING_FROM)
#        LINE=<line>: that line only (default: every line of each component)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

# Without LINE, once per line: each line runs with its own toolchain
# (init.sh sets GOTOOLCHAIN from LINE).
if [[ -z "${LINE:-}" ]]; then
  rc=0
  for line in $(line::all); do
    LINE="${line}" "${BASH_SOURCE[0]}" "$@" || rc=1
  done
  exit "${rc}"
fi

update() {
  local name="$1" from staging_version openapi tree
  from="$(component::setting "${name}" STAGING_FROM)"
  [[ -n "${from}" ]] || fatal "build/${name}/component.env sets no STAGING_FROM"

  # The tree whose staging modules replace the released ones.
  component::load "${from}"
  component::is_materialised || "${REPO_ROOT}/hack/make-rules/apply.sh" "${from}"
  tree="${COMPONENT_TREE}"
  local from_tree="${COMPONENT_TREE_NAME}"
  staging_version="${COMPONENT_STAGING_VERSION:?build/${from}/component.env: STAGING_VERSION is not set}"
  local -a staging
  mapfile -t staging < <(component::staging_modules "${tree}/go.work")
  openapi="$(go mod edit -json "${tree}/go.mod" | jq -r '.Require[] | select(.Path == "k8s.io/kube-openapi") | .Version')"
  [[ -n "${openapi}" ]] || fatal "${tree}/go.mod requires no k8s.io/kube-openapi"

  component::load "${name}"
  # The default line's overlay is the component's, another line's its own.
  local rel_overlay="build/${name}/overlay"
  [[ "${COMPONENT_LINE}" == "$(line::default)" ]] || rel_overlay="$(component::rel_patches)/overlay"
  local overlay="${TARGET_ROOT:-${REPO_ROOT}}/${rel_overlay}"
  local json dir
  tmp="$(mktemp -d)"
  json="$(cd "${tmp}" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "${COMPONENT_MODULE}@${COMPONENT_VERSION}" || true)"
  dir="$(jq -r '.Dir // empty' <<<"${json}")"
  [[ -n "${dir}" ]] || fatal "the module proxy did not serve ${COMPONENT_MODULE}@${COMPONENT_VERSION}: $(jq -r '.Error // "no answer"' <<<"${json}")"

  # ${tmp}/src/<name> is upstream plus the overlay's other files, next to a
  # link to the STAGING_FROM tree, as in ${OUTPUT_SRC}.
  local work="${tmp}/src/${name}"
  mkdir -p "${tmp}/src"
  cp -R "${dir}/." "${work}/"
  chmod -R u+w "${work}"
  ln -s "${tree}" "${tmp}/src/${from_tree}"
  local o
  for o in "${COMPONENT_OVERLAY}" "${COMPONENT_LINE_OVERLAY}"; do
    [[ -d "${o}" ]] || continue
    cp -R "${o}/." "${work}/"
    cp "${dir}/go.mod" "${dir}/go.sum" "${work}/"
    chmod -R u+w "${work}"
  done

  local -a used args
  local prev="" n list
  while :; do
    list="$(cd "${work}" && GOWORK=off GOFLAGS='' go list -m -f '{{.Path}}' all)" || fatal "go list -m all failed in ${work}"
    mapfile -t used < <(sed -n 's#^k8s\.io/##p' <<<"${list}" | LC_ALL=C sort -u)
    args=()
    for n in "${used[@]}"; do
      if printf '%s\n' "${staging[@]}" | grep -qxF "${n}"; then
        args+=(-require "k8s.io/${n}@${staging_version}" -replace "k8s.io/${n}=../${from_tree}/staging/src/k8s.io/${n}")
      fi
    done
    [[ "${args[*]}" != "${prev}" ]] || break
    prev="${args[*]}"
    (
      cd "${work}"
      export GOWORK=off GOFLAGS=
      go mod edit -replace "k8s.io/kube-openapi=k8s.io/kube-openapi@${openapi}" "${args[@]}"
      go mod tidy
    ) || fatal "go mod tidy failed in ${work}"
  done

  # Say so at the top of the file, for whoever reads it in the tree.
  {
    printf '// kube-guard: upstream go.mod with the k8s.io/* staging modules replaced by the\n'
    printf '// patched ones of _output/src/%s (replace directives at the end), and\n' "${from_tree}"
    printf '// k8s.io/kube-openapi by the version %s requires (a module that\n' "${from}"
    printf '// imports this one must repeat that replace). Written by\n'
    printf '// hack/make-rules/update/staging-replaces.sh into %s.\n' "${rel_overlay}"
    cat "${work}/go.mod"
  } >"${tmp}/go.mod"
  mv "${tmp}/go.mod" "${work}/go.mod"
  (cd "${work}" && GOWORK=off GOFLAGS=-mod=readonly go list -m all >/dev/null) || fatal "${work}/go.mod does not load"
  mkdir -p "${overlay}"
  cp "${work}/go.mod" "${work}/go.sum" "${overlay}/"
  rm -rf "${tmp}"
  log "${rel_overlay}/go.mod (line ${COMPONENT_LINE}): $((${#args[@]} / 4)) staging modules -> ../${from_tree}/staging/src/k8s.io/, k8s.io/kube-openapi@${openapi}"
}

tmp=""
trap 'rm -rf "${tmp}"' EXIT

components=("$@")
if [[ ${#components[@]} -eq 0 ]]; then
  while read -r c; do
    [[ -z "$(component::setting "${c}" STAGING_FROM)" ]] || components+=("${c}")
  done < <(component::all)
fi
for c in "${components[@]}"; do
  component::has_line "${c}" || continue
  update "${c}"
done
