#!/usr/bin/env bash
# Writes the generated blocks of the docs from the pins, so that no doc
# repeats a version by hand (verify/versions.sh checks the rest):
#   README.md  <!-- BEGIN GENERATED: pins -->: one row per release line and
#              component, from patches/<component>/<line>/line.env.
#   README.md  <!-- BEGIN GENERATED: topics -->: one row per topic of every
#              series (patches/<c>/<line>/topics), from its TOPIC.md's title and
#              header and its patch count, linking the TOPIC.md.
#   docs/gates.md  <!-- BEGIN GENERATED: gates -->: one row per feature gate
#              a series adds, its stage, default and dependencies read from
#              the patched tree, what it changes from build/<component>/gates.
# verify/docs.sh runs this on a copy and fails when the result differs.
#
# Usage: update/docs.sh [ROOT]   (default: this repository; verify passes a copy)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"
# README's tables name every line; docs/gates.md is the newest line's:
# whatever LINE says.
unset LINE

root="${1:-${REPO_ROOT}}"

pins_block() {
  local c bins what line
  echo "| line | component | pinned upstream release | binaries | fork version | patches |"
  echo "|---|---|---|---|---|---|"
  while read -r line c; do
    LINE="${line}" component::load "${c}"
    bins="$(component::setting "${c}" BINARIES)"
    what="\`${COMPONENT_MODULE}\` ${COMPONENT_VERSION}"
    [[ -z "${COMPONENT_STAGING_VERSION}" ]] || what+=", staging modules ${COMPONENT_STAGING_VERSION}"
    printf '| %s | %s | %s (`%s`) | %s | `%s-%s.<N>` | `%s/` (%s) |\n' "${line}" "${c}" "${what}" \
      "$(component::rel_patches)/line.env" \
      "$(sed 's/[^ ]*/`&`/g; s/ /, /g' <<<"${bins}")" "${COMPONENT_VERSION}" "$(component::setting "${c}" FORK_NAME)" \
      "$(component::rel_patches)" "$(component::series_files | wc -l)"
  done < <(line::components)
}

# topics_block: README's table of topics, in `git am` order per line and
# component.
topics_block() {
  local c t title line
  echo "| line | component | topic | what | patches | gates | depends on | upstream |"
  echo "|---|---|---|---|---|---|---|---|"
  while read -r line c; do
    LINE="${line}" component::load "${c}"
    while read -r t; do
      title="$(sed -n '1s/^# //p' "${COMPONENT_PATCHES}/${t}/TOPIC.md" 2>/dev/null)"
      printf '| %s | %s | [%s](%s/%s/TOPIC.md) | %s | %s | %s | %s | %s |\n' "${line}" "${c}" "${t}" "$(component::rel_patches)" "${t}" "${title}" \
        "$(component::topic_files "${t}" | wc -l)" \
        "$(component::topic_field "${t}" Gates | sed 's/[A-Za-z0-9]\{1,\}/`&`/g; s/ /, /g; s/^`none`$/-/')" \
        "$(component::topic_field "${t}" Depends | sed 's/ /, /g; s/^none$/-/')" \
        "$(component::topic_field "${t}" Upstream-Status | sed 's/ (.*//')"
    done < <(component::topics)
  done < <(line::components)
}

# fork_gates COMPONENT: one line per feature gate the component's series adds
# to its FEATURE_GATES_FILE (in the tree, not in its base tag):
# name<TAB>stage<TAB>default<TAB>since<TAB>dependencies (comma-separated).
fork_gates() {
  local file name
  component::load "$1"
  file="$(component::setting "$1" FEATURE_GATES_FILE)"
  [[ -n "${file}" ]] || return 0
  component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run 'make apply COMPONENT=$1'"
  component::git diff "${COMPONENT_BASE_TAG}" HEAD -- "${file}" |
    sed -n 's/^+[[:space:]]*\([A-Za-z0-9]*\) featuregate\.Feature = "\1"$/\1/p' |
    while read -r name; do
      awk -v name="${name}" '
        # The gate'"'"'s specs: "\tName: {" up to "\t},", or one line "\tName: {Default: ...}".
        $0 ~ "^\t" name ": \\{" && /Default:/ { spec = $0 }
        $0 ~ "^\t" name ": \\{$" { inspec = 1; next }
        inspec && /^\t\},?$/ { inspec = 0 }
        inspec && /Default:/ { spec = $0 }
        # The dependencies: "\tName: {A, B}," or "\tName: {},".
        $0 ~ "^\t" name ": \\{[A-Za-z0-9, ]*\\},$" { deps = $0; sub("^\t" name ": \\{", "", deps); sub("\\},$", "", deps); hasdeps = 1 }
        END {
          if (spec == "") { print "no FeatureSpec for " name > "/dev/stderr"; exit 1 }
          stage = spec; sub(/.*PreRelease: featuregate\./, "", stage); sub(/[^A-Za-z].*/, "", stage)
          def = spec; sub(/.*Default: /, "", def); sub(/[^a-z].*/, "", def)
          since = "-"
          if (spec ~ /MustParse\("/) { since = spec; sub(/.*MustParse\("/, "", since); sub(/".*/, "", since) }
          printf "%s\t%s\t%s\t%s\t%s\n", name, stage, def, since, (hasdeps && deps != "" ? deps : "-")
        }' "${COMPONENT_TREE}/${file}"
    done
}

# gates_block: the table of docs/gates.md, from fork_gates and build/<component>/gates.
gates_block() {
  local c name stage def since deps row changes bypasses upstream data
  echo "| gate | component | stage (since) | default | depends on | what it changes | what it bypasses | upstream status |"
  echo "|---|---|---|---|---|---|---|---|"
  while read -r c; do
    data="${REPO_ROOT}/build/${c}/gates"
    [[ -n "$(component::setting "${c}" FEATURE_GATES_FILE)" ]] || continue
    local -A seen=()
    while IFS=$'\t' read -r name stage def since deps; do
      row="$(grep -E "^${name} \| " "${data}" 2>/dev/null || true)"
      [[ -n "${row}" ]] || fatal "feature gate ${name} of ${c} is not described in build/${c}/gates: add a line '${name} | what it changes | what it bypasses | upstream status'"
      IFS='|' read -r _ changes bypasses upstream <<<"${row}"
      [[ -n "${upstream// /}" ]] || fatal "build/${c}/gates: the line of ${name} needs four fields separated by ' | '"
      seen["${name}"]=1
      printf '| `%s` | %s | %s (%s) | %s | %s | %s | %s | %s |\n' "${name}" "${c}" "${stage}" "${since}" "${def}" \
        "$(sed 's/[A-Za-z0-9]\{1,\}/`&`/g; s/, /, /g' <<<"${deps}" | sed 's/^`-`$/-/')" \
        "$(sed 's/^ *//; s/ *$//' <<<"${changes}")" "$(sed 's/^ *//; s/ *$//' <<<"${bypasses}")" "$(sed 's/^ *//; s/ *$//' <<<"${upstream}")"
    done < <(fork_gates "${c}")
    if [[ -f "${data}" ]]; then
      while read -r name; do
        [[ -n "${seen[${name}]:-}" ]] || fatal "build/${c}/gates describes ${name}, which the ${c} series does not add to $(component::setting "${c}" FEATURE_GATES_FILE): remove its line"
      done < <(grep -v '^#' "${data}" | sed -n 's/^\([A-Za-z0-9]*\) | .*/\1/p')
    fi
    unset seen
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
replace_block "${root}/README.md" topics "$(topics_block)"
replace_block "${root}/docs/gates.md" gates "$(gates_block)"
