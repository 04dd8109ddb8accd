#!/usr/bin/env bash
# The series is a list of topics (patches/<c>/<line>/topics), and each topic stands
# on its own: for every component,
#   - every listed topic is a folder with its patches and a TOPIC.md, and no
#     folder of patches/<c>/<line>/ is left out of the list;
#   - TOPIC.md's header says what the topic is: Upstream-Status (one of
#     not-proposed, proposal-drafted, pr-open <URL>, merged <version>;
#     a drafted proposal is in docs/upstream/<c>/<topic>/), a KEP
#     or Bug (a URL, or "none"), Gates (gates of the patched tree's
#     FEATURE_GATES_FILE, or "none") and Depends (topics listed before it, or
#     "none"); the optional Kind and SIG are upstream's /kind and /sig
#     labels; its "## Patches" table, if it has one, names exactly the
#     topic's patches;
#   - every patch carries "Topic: <its folder>";
#   - every topic applies with `git am --3way`, with only the topics it
#     depends on (transitively) before it, to a fresh checkout of the pinned
#     base: what `make topic-test` and `make upstream-pr` build on.
# Fails, listing every fault, otherwise.
#
# Usage: verify/topics.sh [component...]   (default: every component)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

mapfile -t components < <(component::named_or_all "$@")
bad=0
complain() { printf '%s\n' "$*" >&2; bad=1; }

# check_metadata: the loaded component's list, folders, headers and trailers.
check_metadata() {
  local c="${COMPONENT_NAME}" t d f i key value gates_file
  local -a topics=()
  local -A position=()
  mapfile -t topics < <(component::topics)
  ((${#topics[@]} > 0)) || { complain "$(component::rel_patches)/topics lists no topic"; return; }
  for i in "${!topics[@]}"; do
    t="${topics[${i}]}"
    [[ "${t}" != overlay ]] || complain "$(component::rel_patches)/topics: 'overlay' is the line's overlay folder, not a topic name"
    [[ "${t}" =~ ^[a-z0-9][a-z0-9-]*$ ]] || complain "$(component::rel_patches)/topics: '${t}' is not a topic name (lower case, digits and '-')"
    [[ -z "${position[${t}]:-}" ]] || complain "$(component::rel_patches)/topics lists ${t} twice"
    position["${t}"]="${i}"
  done
  for d in "${COMPONENT_PATCHES}"/*/; do
    [[ -d "${d}" ]] || continue
    t="$(basename "${d}")"
    [[ "${t}" != overlay ]] || continue # the line's overlay (hack/lib/init.sh), not a topic
    [[ -n "${position[${t}]:-}" ]] || complain "$(component::rel_patches)/${t}/ is not in $(component::rel_patches)/topics: list it, or remove the folder"
  done
  while read -r f; do
    complain "$(component::rel_patches)/$(basename "${f}") is not in a topic folder"
  done < <(find "${COMPONENT_PATCHES}" -maxdepth 1 -type f -name '*.patch')
  gates_file="$(component::setting "${c}" FEATURE_GATES_FILE)"
  for i in "${!topics[@]}"; do
    t="${topics[${i}]}"
    [[ -f "${COMPONENT_PATCHES}/${t}/TOPIC.md" ]] || { complain "$(component::rel_patches)/${t}/TOPIC.md is missing"; continue; }
    [[ -n "$(component::topic_files "${t}")" ]] || complain "$(component::rel_patches)/${t}/ has no patch"
    value="$(component::topic_field "${t}" Upstream-Status)"
    [[ "${value}" =~ ^(not-proposed|proposal-drafted|pr-open\ https?://[^[:space:]]+|merged\ v[0-9]+\.[0-9]+(\.[0-9]+)?)([[:space:]]|$) ]] ||
      complain "$(component::rel_patches)/${t}/TOPIC.md: Upstream-Status '${value}' is not one of not-proposed, proposal-drafted, pr-open <URL>, merged <version>"
    if [[ "${value}" == proposal-drafted* && ! -d "${REPO_ROOT}/docs/upstream/${c}/${t}" ]]; then
      complain "$(component::rel_patches)/${t}/TOPIC.md: Upstream-Status proposal-drafted, but docs/upstream/${c}/${t}/ (make upstream-pr's output, update/upstream-examples.sh) is missing"
    fi
    value="$(component::topic_field "${t}" KEP)$(component::topic_field "${t}" Bug)"
    [[ "${value}" =~ ^(none|https?://) ]] || complain "$(component::rel_patches)/${t}/TOPIC.md: no KEP or Bug (a URL, or none)"
    value="$(component::topic_field "${t}" Gates)"
    if [[ -z "${value}" ]]; then
      complain "$(component::rel_patches)/${t}/TOPIC.md: no Gates line (the gates it adds or uses, or none)"
    elif [[ "${value}" != none ]]; then
      for key in ${value}; do
        [[ -n "${gates_file}" ]] && grep -qw -- "${key}" "${COMPONENT_TREE}/${gates_file}" ||
          complain "$(component::rel_patches)/${t}/TOPIC.md: gate ${key} is not in ${gates_file:-FEATURE_GATES_FILE (unset)} of the patched tree"
      done
    fi
    value="$(component::topic_field "${t}" Kind)"
    [[ -z "${value}" || "${value}" =~ ^(bug|cleanup|documentation|feature|failing-test|flake|regression|api-change|deprecation|dependency)$ ]] ||
      complain "$(component::rel_patches)/${t}/TOPIC.md: Kind '${value}' is not one of upstream's /kind labels (bug, cleanup, documentation, feature, ...)"
    value="$(component::topic_field "${t}" SIG)"
    [[ -z "${value}" || "${value}" =~ ^sig-[a-z-]+$ ]] || complain "$(component::rel_patches)/${t}/TOPIC.md: SIG '${value}' is not sig-<name>"
    value="$(component::topic_field "${t}" Depends)"
    if [[ -z "${value}" ]]; then
      complain "$(component::rel_patches)/${t}/TOPIC.md: no Depends line (topics, or none)"
    elif [[ "${value}" != none ]]; then
      for key in ${value}; do
        if [[ -z "${position[${key}]:-}" ]]; then
          complain "$(component::rel_patches)/${t}/TOPIC.md: depends on ${key}, which $(component::rel_patches)/topics does not list"
        elif ((position[${key}] >= i)); then
          complain "$(component::rel_patches)/${t}/TOPIC.md: depends on ${key}, which the list puts after it"
        fi
      done
    fi
    if grep -q '^## Patches' "${COMPONENT_PATCHES}/${t}/TOPIC.md"; then
      diff <(sed -n '/^## Patches/,/^## /s/^| \([0-9]\{4\}\) |.*/\1/p' "${COMPONENT_PATCHES}/${t}/TOPIC.md") \
        <(component::topic_files "${t}" | xargs -rn1 basename | cut -c1-4) >/dev/null ||
        complain "$(component::rel_patches)/${t}/TOPIC.md: its Patches table does not name exactly the topic's patches ($(component::topic_files "${t}" | xargs -rn1 basename | cut -c1-4 | paste -sd' ' -))"
    fi
    while read -r f; do
      [[ -n "${f}" ]] || continue
      value="$(component::patch_trailer "${f}" Topic)"
      [[ "${value}" == "${t}" ]] || complain "$(component::patch_name "${f}"): its Topic trailer says '${value}', its folder ${t}"
    done < <(component::topic_files "${t}")
  done
}

# check_alone: every topic of the loaded component, with its dependencies,
# applies to a fresh checkout of the base.
check_alone() {
  local c="${COMPONENT_NAME}" t wt closure
  local -a files=()
  component::is_materialised || "${REPO_ROOT}/hack/make-rules/materialize.sh" "${c}"
  wt="$(mktemp -d)"
  component::git worktree add --quiet --detach "${wt}/tree" "${COMPONENT_BASE_TAG}"
  while read -r t; do
    closure="$(component::topic_closure "${t}" | paste -sd' ' -)"
    mapfile -t files < <(component::closure_files "${t}")
    (
      COMPONENT_TREE="${wt}/tree"
      component::git reset --quiet --hard "${COMPONENT_BASE_TAG}"
      component::git clean --quiet -fdx
      component::git am --quiet --3way --keep-cr "${files[@]}" >/dev/null 2>&1
    ) || {
      (COMPONENT_TREE="${wt}/tree" component::git am --abort >/dev/null 2>&1) || true
      complain "$(component::rel_patches)/${t} does not apply alone (with $(tr ' ' '\n' <<<"${closure}" | grep -vxF -- "${t}" | paste -sd' ' - | sed 's/^$/no other topic/')) to a fresh ${COMPONENT_BASE_TAG}: declare what it needs in its TOPIC.md's Depends, or move the change"
      continue
    }
    log "  ${c}/${t}: applies alone (${closure}; ${#files[@]} patches)"
  done < <(component::topics)
  component::git worktree remove --force "${wt}/tree"
  rm -rf "${wt}"
}

for c in "${components[@]}"; do
  component::load "${c}"
  [[ -f "${COMPONENT_PATCHES}/topics" ]] || { complain "$(component::rel_patches)/topics is missing: the series is a list of topics (docs/development.md)"; continue; }
  check_metadata
  check_alone
done
[[ "${bad}" -eq 0 ]] || exit 1
log "verify topics: every topic of ${components[*]} is described and applies alone with its dependencies"
