#!/usr/bin/env bash
# Rebuilds the pristine upstream source tree of a component under
# _output/src/<component> from the Go module proxy.
#
# The tree is a git repository with two commits:
#   upstream/<version>  the module zip as published, with each staging module
#                       k8s.io/<name> placed at staging/src/k8s.io/<name> and the
#                       executable bits (dropped by module zips) restored on
#                       files that start with "#!";
#   base/<version>      what an offline module build needs on top: vendor/ holds
#                       no code in the module zip (only OWNERS) and would switch
#                       Go into vendor mode, so it is removed; go.work loses the
#                       modules the proxy refuses; build/<component>/overlay is
#                       copied in (modules that upstream keeps out of the zip).
# patches/<component> applies on top of base/<version>.
#
# Usage: materialize.sh [component [version]]   (default: kubernetes at its pin)
# A version other than the pin is for the rebase tool, which materialises the
# next release in a scratch OUTPUT_DIR. Re-running is a no-op when the
# version and the recipe (component::recipe_id) are unchanged.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

component::load "${1:-kubernetes}" "${2:-}"

recipe="$(component::recipe_id)"
stamp="${COMPONENT_TREE}/.git/materialized-recipe"

if component::is_materialised && [[ -f "${stamp}" && "$(cat "${stamp}")" == "${recipe}" ]]; then
  log "${COMPONENT_TREE}: ${COMPONENT_MODULE}@${COMPONENT_VERSION} already materialised"
  exit 0
fi
if [[ -z "${FORCE:-}" ]]; then
  component::check_no_local_work
fi

# go_download MODULE@VERSION...: prints one JSON object per module (Path, Version,
# Dir, Info, Error) as `go mod download -json` does; outside any module or workspace.
go_download() {
  local tmp
  tmp="$(mktemp -d)"
  (cd "${tmp}" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "$@" || true)
  rm -rf "${tmp}"
}

log "downloading ${COMPONENT_MODULE}@${COMPONENT_VERSION}"
main_json="$(go_download "${COMPONENT_MODULE}@${COMPONENT_VERSION}")"
main_dir="$(jq -r '.Dir // empty' <<<"${main_json}")"
[[ -n "${main_dir}" ]] || fatal "the module proxy did not serve ${COMPONENT_MODULE}@${COMPONENT_VERSION}: $(jq -r '.Error // "no answer"' <<<"${main_json}")"
# The upstream commit time, from the proxy's .info, dates the import commits.
import_date="$(jq -r '.Time' "$(jq -r '.Info' <<<"${main_json}")")"

new="${COMPONENT_TREE}.new"
rm -rf "${new}"
mkdir -p "${new}"
cp -R "${main_dir}/." "${new}/"
chmod -R u+w "${new}"

# Staging modules: every ./staging/src/k8s.io/<name> that go.work uses.
staging=()
refused=()
if [[ -n "${COMPONENT_STAGING_VERSION}" && -f "${new}/go.work" ]]; then
  mapfile -t names < <(component::staging_modules "${new}/go.work")
  log "downloading ${#names[@]} staging modules at ${COMPONENT_STAGING_VERSION}"
  args=()
  for n in "${names[@]}"; do args+=("k8s.io/${n}@${COMPONENT_STAGING_VERSION}"); done
  staging_json="$(go_download "${args[@]}" | jq -c .)"
  for n in "${names[@]}"; do
    dir="$(jq -r --arg p "k8s.io/${n}" 'select(.Path == $p) | .Dir // empty' <<<"${staging_json}")"
    if [[ -z "${dir}" ]]; then
      err="$(jq -r --arg p "k8s.io/${n}" 'select(.Path == $p) | .Error // "no answer"' <<<"${staging_json}")"
      log "  k8s.io/${n}@${COMPONENT_STAGING_VERSION} refused by the proxy (${err}); dropped from go.work"
      refused+=("${n}")
      continue
    fi
    mkdir -p "${new}/staging/src/k8s.io/${n}"
    cp -R "${dir}/." "${new}/staging/src/k8s.io/${n}/"
    staging+=("${n}")
  done
  chmod -R u+w "${new}/staging"
fi

# Module zips keep no file modes: scripts (files starting with "#!") become
# executable again, everything else is a plain file.
find "${new}" -type f -exec chmod 0644 {} +
find "${new}" -type f -print0 |
  xargs -0r awk 'FNR == 1 && /^#!/ { printf "%s%c", FILENAME, 0 } { nextfile }' | xargs -0r chmod 0755

export GIT_AUTHOR_DATE="${import_date}" GIT_COMMITTER_DATE="${import_date}"
COMPONENT_TREE="${new}"
component::git init --quiet --initial-branch=main
# Store every file byte for byte: upstream's .gitattributes (text=auto eol=lf)
# would otherwise rewrite the CRLF test fixtures some staging modules ship.
printf '* -text\n' >"${new}/.git/info/attributes"
component::git add --all --force .
component::git commit --quiet --no-verify -m "Import ${COMPONENT_MODULE} ${COMPONENT_VERSION} from the Go module proxy" \
  -m "The module zip of ${COMPONENT_MODULE}@${COMPONENT_VERSION}${staging:+, with ${#staging[@]} staging modules at ${COMPONENT_STAGING_VERSION} under staging/src/k8s.io/}.
Executable bits restored on files that start with #!."
component::git tag "${COMPONENT_UPSTREAM_TAG}"

# Offline-build adjustments.
notes=()
if [[ -d "${new}/vendor" ]] && [[ -z "$(find "${new}/vendor" -name '*.go' -print -quit)" ]]; then
  component::git rm --quiet -r vendor
  notes+=("- vendor/ holds no code in the module zip and would force vendor mode: removed.")
fi
for n in "${refused[@]}"; do
  sed -i "\#^[[:space:]]*\./staging/src/k8s.io/${n}[[:space:]]*\$#d" "${new}/go.work"
  notes+=("- go.work: k8s.io/${n} is not served by the module proxy: dropped.")
done
if [[ -d "${COMPONENT_OVERLAY}" ]]; then
  cp -R "${COMPONENT_OVERLAY}/." "${new}/"
  notes+=("- added from build/${COMPONENT_NAME}/overlay: $(cd "${COMPONENT_OVERLAY}" && find . ! -type d | sed 's#^\./##' | LC_ALL=C sort | paste -sd' ').")
fi
if [[ -d "${COMPONENT_LINE_OVERLAY}" ]]; then
  cp -R "${COMPONENT_LINE_OVERLAY}/." "${new}/"
  notes+=("- added from $(component::rel_patches)/overlay (line ${COMPONENT_LINE}): $(cd "${COMPONENT_LINE_OVERLAY}" && find . ! -type d | sed 's#^\./##' | LC_ALL=C sort | paste -sd' ').")
fi
component::git add --all --force .
component::git commit --quiet --no-verify --allow-empty -m "Prepare ${COMPONENT_MODULE} ${COMPONENT_VERSION} for offline module builds" \
  -m "$(printf '%s\n' "${notes[@]:-"- nothing to adjust."}")"
component::git tag "${COMPONENT_BASE_TAG}"
unset GIT_AUTHOR_DATE GIT_COMMITTER_DATE

COMPONENT_TREE="${new%.new}"
rm -rf "${COMPONENT_TREE}"
mv "${new}" "${COMPONENT_TREE}"
# In step with no series yet: apply.sh applies patches/ onto the fresh base.
printf '%s %s\n' "$(component::git rev-parse HEAD)" "materialised" >"$(component::sync_file)"
echo "${recipe}" >"${stamp}"
log "${COMPONENT_TREE}: ${COMPONENT_MODULE}@${COMPONENT_VERSION} at $(component::git rev-parse --short "${COMPONENT_BASE_TAG}") (tags ${COMPONENT_UPSTREAM_TAG}, ${COMPONENT_BASE_TAG})"
