#!/usr/bin/env bash
# Writes the generated blocks of the docs from the pins, so that no doc
# repeats a version by hand (verify/versions.sh checks the rest):
#   README.md  <!-- BEGIN GENERATED: pins -->: one row per component, from
#              build/<component>/component.env.
# verify/docs.sh runs this on a copy and fails when the result differs.
#
# Usage: update/docs.sh [ROOT]   (default: this repository; verify passes a copy)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

root="${1:-${REPO_ROOT}}"

pins_block() {
  local c bins what
  echo "| component | pinned upstream release | binaries | fork version | patches |"
  echo "|---|---|---|---|---|"
  while read -r c; do
    component::load "${c}"
    bins="$(component::setting "${c}" BINARIES)"
    what="\`${COMPONENT_MODULE}\` ${COMPONENT_VERSION}"
    [[ -z "${COMPONENT_STAGING_VERSION}" ]] || what+=", staging modules ${COMPONENT_STAGING_VERSION}"
    printf '| %s | %s (`build/%s/component.env`) | %s | `%s-%s.<N>` | `patches/%s/` (%s) |\n' "${c}" "${what}" "${c}" \
      "$(sed 's/[^ ]*/`&`/g; s/ /, /g' <<<"${bins}")" "${COMPONENT_VERSION}" "$(component::setting "${c}" FORK_NAME)" \
      "${c}" "$(component::series_files | wc -l)"
  done < <(component::all)
}

# replace_block FILE NAME CONTENT: the lines between the markers of NAME.
replace_block() {
  local file="$1" name="$2" content="$3" tmp
  grep -q "^<!-- BEGIN GENERATED: ${name} " "${file}" || fatal "${file} has no <!-- BEGIN GENERATED: ${name} ... --> block"
  tmp="$(mktemp)"
  awk -v name="${name}" -v content="${content}" '
    $0 ~ "^<!-- BEGIN GENERATED: " name " " { print; print content; skip = 1; next }
    skip && /^<!-- END GENERATED -->/ { skip = 0 }
    !skip { print }
  ' "${file}" >"${tmp}"
  cat "${tmp}" >"${file}"
  rm -f "${tmp}"
}

replace_block "${root}/README.md" pins "$(pins_block)"
