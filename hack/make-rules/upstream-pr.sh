#!/usr/bin/env bash
# `make upstream-pr TOPIC=<topic> [COMPONENT=<c>]`: one topic as a pull
# request for upstream, under _output/upstream-pr/<c>/<topic>/:
#   - the branch upstream-pr/<topic> in _output/src/<c>: the topic's commits
#     (after those of the topics it depends on) on the pristine release
#     (tag upstream/<pin>), their messages without the fork's trailers
#     (Rebase-Policy, Regenerate, Topic);
#   - patches/: `git format-patch` of the topic's own commits on that branch;
#   - PULL_REQUEST.md: the description in upstream's pull request template
#     (the release's .github/PULL_REQUEST_TEMPLATE.md headings), written from
#     the topic's TOPIC.md: what it does, the issue or KEP, notes for
#     reviewers (dependencies, tests, its "## Notes for reviewers"), its
#     "## Benchmarks", the release-note block and the docs block.
# A topic too large for one review says how it splits in a "## Pull requests"
# section of its TOPIC.md, a table with one row a pull request, in order:
#   | pull request | patches | what |
#   |---|---|---|
#   | api | 0001-0008 | the API, its validation, ... |
# Then each pull request gets a folder <k>-<name>/ (patches/ renumbered from
# 0001, PULL_REQUEST.md saying which part it is and what it builds on) and a
# branch upstream-pr/<topic>-<k>-<name> that ends at its last commit; the
# release note goes with the first part, the benchmarks with the last.
# It refuses a topic that is not ready: one whose commit messages or
# description name the fork, whose Go files are not gofmt-clean, whose API
# lines fail upstream's kube-api-linter (verify/api-lint.sh), or whose
# generated files upstream's generators would change (verify-codegen.sh, for
# a topic with a Regenerate trailer); checked on a tree of the topic and its
# dependencies on the pinned base (component::topic_worktree, at
# _output/src/upstream-pr-<c>).
#
# Usage: upstream-pr.sh COMPONENT TOPIC
#   UPSTREAM_PR_OUT=<dir> writes the patches and the description there instead
#   (update/upstream-examples.sh writes docs/upstream/<c>/<topic>/ with it).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

[[ $# -eq 2 && -n "$2" ]] || fatal "usage: make upstream-pr TOPIC=<topic> [COMPONENT=<c>] (topics: patches/<c>/<line>/topics)"
component::load "$1"
topic="$2"
component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run 'make apply COMPONENT=${COMPONENT_NAME}$(line::hint)' first"
md="${COMPONENT_PATCHES}/${topic}/TOPIC.md"
[[ -f "${md}" ]] || fatal "$(component::rel_patches)/${topic}/TOPIC.md is missing (topics: $(component::topics | paste -sd' ' -))"
mapfile -t closure < <(component::topic_closure "${topic}")
mapfile -t own < <(component::topic_files "${topic}")
deps=()
for t in "${closure[@]}"; do [[ "${t}" == "${topic}" ]] || deps+=("${t}"); done

# section NAME: the body of TOPIC.md's "## NAME" section, or nothing.
section() {
  awk -v name="## $1" '$0 == name { on = 1; next } on && /^## / { exit } on' "${md}" |
    sed -e '/./,$!d' | sed -e ':a' -e '/^\n*$/{$d;N;ba' -e '}'
}
# intro: TOPIC.md's prose between its header and its first section.
intro() {
  awk 'NR == 1 { next } !head && /^$/ && NR > 2 { head = 1; next } head && /^## / { exit } head' "${md}" |
    sed -e '/./,$!d' | sed -e ':a' -e '/^\n*$/{$d;N;ba' -e '}'
}

out="${UPSTREAM_PR_OUT:-${OUTPUT_DIR}/upstream-pr/${COMPONENT_NAME}/${topic}}"
rm -rf "${out}"
mkdir -p "${out}/patches"
problems=()

# The fork's own words have no place upstream.
fork="$(component::setting "${COMPONENT_NAME}" FORK_NAME)"
for f in "${own[@]}"; do
  if sed -n '/^Subject:/,/^---$/p' "${f}" | grep -qiE "kube-${fork}\b|kube-guard"; then
    problems+=("$(component::patch_name "${f}"): its message names the fork; say it in upstream's terms")
  fi
done
if { intro; section "Notes for reviewers"; section "Benchmarks"; section "Release note"; section "Pull requests"; } | grep -qiE "kube-${fork}\b|kube-guard"; then
  problems+=("$(component::rel_patches)/${topic}/TOPIC.md: the text a pull request takes from it names the fork")
fi

# The pull requests the topic splits into (its "## Pull requests" table):
# part_names, part_first, part_last (patch numbers), part_what.
part_names=() part_first=() part_last=() part_what=()
next=1
while IFS=$'\t' read -r name range what; do
  if [[ ! "${name}" =~ ^[a-z0-9][a-z0-9-]*$ || ! "${range}" =~ ^([0-9]{4})(-([0-9]{4}))?$ ]]; then
    problems+=("${md#"${REPO_ROOT}/"}: pull request '${name}': want a name of [a-z0-9-] and patches NNNN or NNNN-NNNN, got '${range}'")
    continue
  fi
  first=$((10#${BASH_REMATCH[1]}))
  last=$((10#${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}))
  if ((first != next || last < first || last > ${#own[@]})); then
    problems+=("${md#"${REPO_ROOT}/"}: pull request '${name}' has patches ${range}; the pull requests must take the topic's ${#own[@]} patches in order, each once (next: $(printf '%04d' "${next}"))")
  fi
  next=$((last + 1))
  part_names+=("${name}") part_first+=("${first}") part_last+=("${last}") part_what+=("${what}")
done < <(section "Pull requests" | awk -F'|' 'NR > 2 && NF >= 5 {
  for (i = 2; i <= 4; i++) { gsub(/^[ \t`]+|[ \t`]+$/, "", $i) }
  print $2 "\t" $3 "\t" $4 }')
if ((${#part_names[@]} > 0 && next != ${#own[@]} + 1)); then
  problems+=("${md#"${REPO_ROOT}/"}: its pull requests end at patch $(printf '%04d' $((next - 1))) of ${#own[@]}")
fi

# Upstream's checks, on a tree of the topic and its dependencies.
tree="$(component::topic_worktree "${topic}" upstream-pr)"
mapfile -t gofiles < <(GIT_CONFIG_GLOBAL=/dev/null git -C "${tree}" diff --name-only --diff-filter=d "${COMPONENT_BASE_TAG}" -- '*.go')
if ((${#gofiles[@]} > 0)); then
  unformatted="$(cd "${tree}" && gofmt -l "${gofiles[@]}")"
  [[ -z "${unformatted}" ]] || problems+=("gofmt -l: ${unformatted//$'\n'/ }")
fi
if [[ -n "$(component::setting "${COMPONENT_NAME}" API_LINT_PATHS)" ]]; then
  COMPONENT_TREE_AT="${tree}" "${REPO_ROOT}/hack/make-rules/verify/api-lint.sh" "${COMPONENT_NAME}" ||
    problems+=("upstream's kube-api-linter finds issues in the API lines of ${closure[*]} (above)")
fi
if [[ -n "$(for f in "${own[@]}"; do component::patch_trailer "${f}" Regenerate; done)" ]]; then
  COMPONENT_TREE_AT="${tree}" "${REPO_ROOT}/hack/make-rules/verify-codegen.sh" "${COMPONENT_NAME}" ||
    problems+=("upstream's generators change the generated files of ${closure[*]} (above)")
fi
if ((${#problems[@]} > 0)); then
  printf '!!! %s\n' "${problems[@]}" >&2
  fatal "$(component::rel_patches)/${topic} is not ready for an upstream pull request"
fi

# The branch, on the pristine release, without the fork's trailers.
branch="upstream-pr/${topic}"
clean="$(mktemp -d)"
wt="$(mktemp -d)/tree"
trap 'rm -rf "${clean}"; component::git worktree remove --force "${wt}" >/dev/null 2>&1 || true' EXIT
n=0
while read -r f; do
  n=$((n + 1))
  awk 'BEGIN { body = 1 } /^---$/ { body = 0 } body && /^(Rebase-Policy|Regenerate|Topic): / { next } { print }' "${f}" \
    >"${clean}/$(printf '%04d' "${n}")-$(basename "${f}" | cut -c6-)"
done < <(component::closure_files "${topic}")
component::git worktree prune
component::git worktree add --quiet -B "${branch}" "${wt}" "${COMPONENT_UPSTREAM_TAG}"
(
  COMPONENT_TREE="${wt}"
  mapfile -t files < <(find "${clean}" -name '*.patch' | LC_ALL=C sort)
  component::git am --quiet --3way --keep-cr --committer-date-is-author-date "${files[@]}" ||
    fatal "${COMPONENT_NAME}/${topic} does not apply to the pristine ${COMPONENT_UPSTREAM_TAG} (it applies to ${COMPONENT_BASE_TAG}: an offline-build adjustment of build/${COMPONENT_NAME}/overlay is in its way)"
  if ((${#part_names[@]} == 0)); then
    component::git format-patch --quiet --zero-commit --full-index --no-signature --stat=80 \
      -o "${out}/patches" "HEAD~${#own[@]}..HEAD"
  else
    rmdir "${out}/patches"
    for k in "${!part_names[@]}"; do
      dir="${out}/$((k + 1))-${part_names[k]}"
      from="HEAD~$((${#own[@]} - part_first[k] + 1))" to="HEAD~$((${#own[@]} - part_last[k]))"
      component::git format-patch --quiet --zero-commit --full-index --no-signature --stat=80 \
        -o "${dir}/patches" "${from}..${to}"
      component::git branch -f "${branch}-$((k + 1))-${part_names[k]}" "${to}"
    done
  fi
)

# The description, in the headings of upstream's template.
template="${COMPONENT_TREE}/.github/PULL_REQUEST_TEMPLATE.md"
headings=(
  "#### What type of PR is this?"
  "#### What this PR does / why we need it:"
  "#### Which issue(s) this PR is related to:"
  "#### Special notes for your reviewer:"
  "#### Does this PR introduce a user-facing change?"
  "#### Additional documentation e.g., KEPs (Kubernetes Enhancement Proposals), usage docs, etc.:"
)
if [[ -f "${template}" ]]; then
  for h in "${headings[@]}"; do
    grep -qxF -- "${h}" "${template}" || fatal "${template#"${REPO_ROOT}/"} has no heading '${h}': upstream changed its template, update hack/make-rules/upstream-pr.sh"
  done
fi
kep="$(component::topic_field "${topic}" KEP)"
bug="$(component::topic_field "${topic}" Bug)"
kind="$(component::topic_field "${topic}" Kind)"
sig="$(component::topic_field "${topic}" SIG)"
notes="$(section "Notes for reviewers")"
bench="$(section "Benchmarks")"
note="$(section "Release note" | sed -e '/^```/d')"
# describe DIR PART WHAT WITH_BENCH RELEASE_NOTE: DIR/PULL_REQUEST.md for the
# patches in DIR/patches; PART says which part of the topic it is (or is
# empty), WHAT what this part does (or empty).
describe() {
  local dir="$1" part="$2" what="$3" with_bench="$4" release_note="$5" f
  {
    echo "${headings[0]}"
    echo
    echo "/kind ${kind:-feature}"
    [[ -z "${sig}" ]] || echo "/sig ${sig#sig-}"
    echo
    echo "${headings[1]}"
    echo
    if [[ -n "${what}" ]]; then
      echo "${what^}."
      echo
    fi
    intro
    echo
    echo "Commits:"
    for f in "${dir}/patches"/*.patch; do
      echo "- $(sed -n '/^Subject: /{s/^Subject: \[PATCH[^]]*\] //;N;s/\n / /;s/\n.*//;p;q}' "${f}")"
    done
    echo
    echo "${headings[2]}"
    echo
    if [[ "${bug}" =~ ^https?:// ]]; then echo "${bug%% *}"; fi
    if [[ "${kep}" =~ ^https?:// ]]; then echo "KEP: ${kep%% *}"; fi
    if [[ ! "${bug}${kep}" =~ https?:// ]]; then echo "N/A"; fi
    echo
    echo "${headings[3]}"
    echo
    [[ -z "${part}" ]] || { echo "${part}"; echo; }
    if ((${#deps[@]} > 0)); then
      echo "This builds on the pull request(s) of: ${deps[*]}; their commits come first on the branch and are not part of this one."
      echo
    fi
    [[ -z "${notes}" ]] || { echo "${notes}"; echo; }
    if [[ -n "${bench}" && "${with_bench}" == 1 ]]; then
      echo "Benchmarks:"
      echo
      echo "${bench}"
      echo
    fi
    echo "${headings[4]}"
    echo
    echo '```release-note'
    echo "${release_note:-NONE}"
    echo '```'
    echo
    echo "${headings[5]}"
    echo
    echo '```docs'
    if [[ "${kep}" =~ ^https?:// ]]; then echo "- [KEP]: ${kep%% *}"; fi
    echo '```'
  } >"${dir}/PULL_REQUEST.md"
}
if ((${#part_names[@]} == 0)); then
  describe "${out}" "" "" 1 "${note}"
else
  n_parts=${#part_names[@]}
  for k in "${!part_names[@]}"; do
    part="Part $((k + 1)) of ${n_parts} of this change, reviewed in ${n_parts} pull requests in this order: ${part_names[*]}."
    if ((k > 0)); then
      part+=" It builds on part ${k} (${part_names[k - 1]}): its branch holds the earlier parts' commits first, which are not part of this one."
    fi
    with_bench=0 release_note=""
    ((k + 1 < n_parts)) || with_bench=1
    ((k > 0)) || release_note="${note}"
    describe "${out}/$((k + 1))-${part_names[k]}" "${part}" "${part_what[k]}" "${with_bench}" "${release_note}"
  done
fi

where="${out#"${REPO_ROOT}/"}/patches/, ${out#"${REPO_ROOT}/"}/PULL_REQUEST.md"
if ((${#part_names[@]} > 0)); then
  where="${#part_names[@]} pull requests:"
  for k in "${!part_names[@]}"; do
    where+=" ${branch}-$((k + 1))-${part_names[k]} (${out#"${REPO_ROOT}/"}/$((k + 1))-${part_names[k]}/)"
  done
fi
log "${COMPONENT_NAME}/${topic}: branch ${branch} in ${COMPONENT_TREE#"${REPO_ROOT}/"} (${#own[@]} commits on ${COMPONENT_UPSTREAM_TAG}$( ((${#deps[@]} == 0)) || echo " after ${deps[*]}")), ${where}"
