#!/usr/bin/env bash
# Common set-up sourced by every script under hack/.
# Scripts that source it must already have `set -o errexit -o nounset -o pipefail`.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
OUTPUT_DIR="${OUTPUT_DIR:-${REPO_ROOT}/_output}"
OUTPUT_BIN="${OUTPUT_DIR}/bin"
OUTPUT_SRC="${OUTPUT_DIR}/src"
export REPO_ROOT OUTPUT_DIR OUTPUT_BIN OUTPUT_SRC

# Use the Go on this machine; never download another toolchain, except the
# one the selected release line names (line::toolchain, set at the end of
# this file).
export GOTOOLCHAIN=local
# Module downloads come from the configured module proxy only.
export GOFLAGS="${GOFLAGS:-}"

# Fixed identity and time zone for every commit the scripts make in a
# materialised tree, so that commits (and so exported patches) are reproducible.
export GIT_AUTHOR_NAME="${GIT_AUTHOR_NAME:-patch-series}"
export GIT_AUTHOR_EMAIL="${GIT_AUTHOR_EMAIL:-patch-series@localhost}"
export GIT_COMMITTER_NAME="${GIT_COMMITTER_NAME:-patch-series}"
export GIT_COMMITTER_EMAIL="${GIT_COMMITTER_EMAIL:-patch-series@localhost}"

log() { printf '+++ %s\n' "$*" >&2; }
fatal() { printf '!!! %s\n' "$*" >&2; exit 1; }

# free_gib PATH: GiB free on the file system that holds PATH (or its nearest
# existing parent).
free_gib() {
  local p="$1"
  while [[ ! -e "${p}" && "${p}" != / ]]; do p="$(dirname "${p}")"; done
  df -P -B1G "${p}" | awk 'NR == 2 {print $4}'
}

# trim_go_cache GIB: when the file system of the Go build cache ($(go env
# GOCACHE)) has less than GIB GiB free, deletes the cache's least recently
# used entries (go marks an entry used through its modification time, which
# its own trimming reads too) until GIB GiB are free or the cache is empty.
# The cache only ever saves time: go rebuilds what is missing. It logs what
# it deleted; GOCACHE_TRIM=0 leaves the cache alone.
trim_go_cache() {
  local need="$1" cache free
  [[ "${GOCACHE_TRIM:-1}" != 0 ]] || return 0
  cache="$(go env GOCACHE)"
  [[ -d "${cache}" && "${cache}" != off ]] || return 0
  free="$(free_gib "${cache}")"
  ((free < need)) || return 0
  # Deficit plus 1 GiB, as deleted bytes only approximate freed blocks.
  local want=$(((need - free + 1) * 1024 * 1024 * 1024)) list
  list="$(mktemp)"
  find "${cache}" -mindepth 2 -maxdepth 2 -type f -printf '%T@ %s %p\n' |
    sort -n | awk -v want="${want}" 'sum < want { sum += $2; print }' >"${list}"
  cut -d' ' -f3- "${list}" | xargs -d '\n' -r rm -f
  local deleted
  deleted="$(awk '{ s += $2 } END { printf "%d", s / 1048576 }' "${list}")"
  rm -f "${list}"
  log "${free} GiB free for the Go build cache, ${need} wanted: deleted its least recently used entries (${deleted} MiB); now $(free_gib "${cache}") GiB free (GOCACHE_TRIM=0 keeps the cache)"
}

# require_free_disk GIB PATH...: fails, naming each PATH and what is free
# there, when any PATH's file system has less than GIB GiB free. A full disk
# otherwise shows up much later and far from its cause (an etcd that exits
# on a failed write, then every request of the tests timing out).
require_free_disk() {
  local need="$1" p free short=""
  shift
  for p in "$@"; do
    free="$(free_gib "${p}")"
    ((free >= need)) || short+=" ${p} (${free} GiB free)"
  done
  [[ -z "${short}" ]] || fatal "less than ${need} GiB free on:${short}; free some space (the Go build cache, \$(go env GOCACHE), is the largest: 'go clean -cache' empties it) or lower MIN_FREE_GIB"
}

# port_busy PORT: something accepts connections on 127.0.0.1:PORT.
port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Release lines. A component carries one patch series per release line of
# kube-guard, a folder patches/<c>/<line>/ (the line is a Kubernetes minor,
# "1.37", for every component: the descheduler's line 1.37 is the descheduler
# release built on kube-guard's Kubernetes 1.37) holding:
#   line.env   the upstream release of that line: UPSTREAM_VERSION=vX.Y.Z
#              (the one place a pin is written; make rebase moves it);
#   topics     the line's ordered topics, and a folder per topic.
# LINE picks the line every script works on (make ... LINE=1.36); the default
# is the newest line any component has that is not a preview
# (line::default). The tree of the default line is _output/src/<c>, of
# another one (older, or a preview) _output/src/<c>-<line>; its binaries go
# to _output/bin (default line) or _output/bin/<line>/ (line::bin).

# LINE, when set, must name a line that exists; checked here, in the shell
# that sources this file, so that a typo fails instead of selecting nothing.
line::check() {
  [[ -n "${LINE:-}" ]] || return 0
  line::all | grep -qxF -- "${LINE}" ||
    fatal "LINE=${LINE} is not a release line of this repository (lines: $(line::all | paste -sd' ' -); a line is a folder patches/<c>/<line>/ with a line.env)"
}

# component::lines NAME: the release lines of component NAME, oldest first.
component::lines() {
  local d
  for d in "${REPO_ROOT}/patches/$1"/*/line.env; do
    [[ -f "${d}" ]] && basename "$(dirname "${d}")"
  done | sort -V
}

# line::default: the newest line of any component that is not a preview
# (line::is_preview): what every target works on unless LINE says otherwise.
line::default() {
  local l
  for l in $(line::all | sort -rV); do
    line::is_preview "${l}" || { printf '%s\n' "${l}"; return 0; }
  done
}

# line::newest: the newest line of any component, a preview included: the
# line upstream pull requests are made on (hack/make-rules/upstream-pr.sh).
line::newest() {
  line::all | tail -n1
}

# line::env_value LINE NAME: the value NAME has in the line.env of LINE of any
# component (the first that sets it), empty when none does. line.env files
# are plain NAME=value lines, read here without running them (a value in
# double quotes, a list, is returned without them).
line::env_value() {
  local d
  for d in "${REPO_ROOT}"/patches/*/"$1"/line.env; do
    [[ -f "${d}" ]] || continue
    sed -n "s/^$2=//p" "${d}" | tail -n1 | sed 's/^"\(.*\)"$/\1/' | grep . && return 0
  done
  return 0
}

# line::is_preview [LINE]: LINE (default: the selected line) is a preview, a
# line pinned to an upstream pre-release (LINE_PREVIEW=true in its line.env):
# never the default line, and `make rebase` moves its pin to the release.
line::is_preview() {
  [[ "$(line::env_value "${1:-$(line::selected)}" LINE_PREVIEW)" == "true" ]]
}

# line::toolchain [LINE]: the Go toolchain of LINE (LINE_GOTOOLCHAIN in its
# line.env, a go command toolchain name such as go1.27.3, which the go
# command fetches from the module proxy); "local", the Go on this machine,
# when the line names none.
line::toolchain() {
  local t
  t="$(line::env_value "${1:-$(line::selected)}" LINE_GOTOOLCHAIN)"
  printf '%s\n' "${t:-local}"
}

# line::selected: the line scripts work on: LINE, or the default.
line::selected() {
  local l="${LINE:-}"
  [[ -n "${l}" ]] || l="$(line::default)"
  [[ "${l}" =~ ^[0-9]+\.[0-9]+$ ]] || fatal "LINE=${l} is not a release line (<major>.<minor>, one of: $(line::all | paste -sd' ' -))"
  printf '%s\n' "${l}"
}

# line::hint: " LINE=<line>" when the selected line is not the default, for
# the commands messages tell a person to run.
line::hint() {
  [[ -z "${LINE:-}" || "${LINE}" == "$(line::default)" ]] || printf ' LINE=%s' "${LINE}"
}

# line::require_default WHAT: fails when LINE selects another line than the
# newest, for what works on the newest line only so far.
line::require_default() {
  [[ -z "${LINE:-}" || "${LINE}" == "$(line::default)" ]] ||
    fatal "$1 works on the newest release line ($(line::default)) only so far, not on LINE=${LINE}"
}

# line::images: where `make images` puts the selected line's images:
# _output/images for the default line, _output/images-<line> for another.
line::images() {
  line::path "${OUTPUT_DIR}/images" -
}

# line::path BASE SEP: BASE for the default line, BASE<SEP><line> for the
# selected line when it is another.
line::path() {
  local l
  l="$(line::selected)"
  if [[ "${l}" == "$(line::default)" ]]; then
    printf '%s\n' "$1"
  else
    printf '%s%s%s\n' "$1" "$2" "${l}"
  fi
}

# line::all: every line of any component, oldest first.
line::all() {
  local d
  for d in "${REPO_ROOT}"/patches/*/*/line.env; do
    [[ -f "${d}" ]] && basename "$(dirname "${d}")"
  done | sort -uV
}

# line::components: every release line and each component it carries, one
# "<line> <component>" a line, newest line first (components in dependency
# order): what a script that covers every line iterates over.
line::components() {
  local l
  for l in $(line::all | sort -rV); do
    LINE="${l}" component::all | sed "s/^/${l} /"
  done
}

# line::bin: where the binaries of the selected line go: _output/bin for the
# default line, _output/bin/<line> for another (tools such as etcd and kind
# stay in _output/bin, shared by every line).
line::bin() {
  line::path "${OUTPUT_BIN}" /
}

# component::has_line NAME [LINE]: component NAME carries LINE (default: the
# selected line).
component::has_line() {
  [[ -f "${REPO_ROOT}/patches/$1/${2:-$(line::selected)}/line.env" ]]
}

# component::line_env NAME: the line.env of NAME's selected line; fails,
# naming the lines it has, when it has not that line.
component::line_env() {
  local l
  l="$(line::selected)"
  component::has_line "$1" "${l}" ||
    fatal "component $1 has no release line ${l} (patches/$1/${l}/line.env; it has: $(component::lines "$1" | paste -sd' ' -))"
  printf '%s\n' "${REPO_ROOT}/patches/$1/${l}/line.env"
}

# component::load NAME [VERSION]: reads build/NAME/component.env and the
# line.env of NAME's selected line into COMPONENT_* variables. VERSION, when
# given, stands in for the line's UPSTREAM_VERSION, and what component.env
# derives from it (STAGING_VERSION) follows: that is how the rebase tool
# looks at a release before the pin moves.
component::load() {
  local name="$1" version="${2:-}"
  local env="${REPO_ROOT}/build/${name}/component.env" line_env
  [[ -f "${env}" ]] || fatal "unknown component '${name}': ${env} does not exist"
  line_env="$(component::line_env "${name}")" || exit 1
  COMPONENT_NAME="${name}"
  COMPONENT_MODULE=""
  COMPONENT_VERSION=""
  COMPONENT_STAGING_VERSION=""
  UPSTREAM_MODULE="" UPSTREAM_VERSION="" STAGING_VERSION="" GENERATED_PATHS=""
  # shellcheck disable=SC1090
  source "${line_env}"
  if [[ -n "${version}" ]]; then
    [[ "${version}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || fatal "'${version}' is not a release version (vX.Y.Z)"
    UPSTREAM_VERSION="${version}"
  fi
  ! grep -q '^UPSTREAM_VERSION=' "${env}" ||
    fatal "${env} sets UPSTREAM_VERSION: a pin belongs in patches/${name}/<line>/line.env"
  # shellcheck disable=SC1090
  source "${env}"
  COMPONENT_MODULE="${UPSTREAM_MODULE:?${env}: UPSTREAM_MODULE is not set}"
  COMPONENT_VERSION="${UPSTREAM_VERSION:?${line_env}: UPSTREAM_VERSION is not set}"
  COMPONENT_STAGING_VERSION="${STAGING_VERSION:-}"
  COMPONENT_GENERATED_PATHS="${GENERATED_PATHS:-}"
  COMPONENT_LINE="$(line::selected)"
  COMPONENT_LINE_ENV="${line_env}"
  # COMPONENT_TREE_AT stands for the tree where a script must work on another
  # checkout of it (make topic-test's worktree of one topic).
  COMPONENT_TREE_NAME="${name}"
  if [[ "${COMPONENT_LINE}" != "$(line::default)" ]]; then
    COMPONENT_TREE_NAME="${name}-${COMPONENT_LINE}"
  fi
  COMPONENT_TREE="${COMPONENT_TREE_AT:-${OUTPUT_SRC}/${COMPONENT_TREE_NAME}}"
  COMPONENT_PATCHES="${REPO_ROOT}/patches/${name}/${COMPONENT_LINE}"
  COMPONENT_OVERLAY="${REPO_ROOT}/build/${name}/overlay"
  # A line's own overlay files (patches/<c>/<line>/overlay/), copied over
  # COMPONENT_OVERLAY's: what differs between lines, e.g. the versions of the
  # generators' tools, which follow the line's release.
  COMPONENT_LINE_OVERLAY="${COMPONENT_PATCHES}/overlay"
  # Tags in the materialised tree: the untouched upstream, and the base the
  # patch series applies to (upstream plus the offline-build adjustments).
  COMPONENT_UPSTREAM_TAG="upstream/${COMPONENT_VERSION}"
  COMPONENT_BASE_TAG="base/${COMPONENT_VERSION}"
  export COMPONENT_NAME COMPONENT_MODULE COMPONENT_VERSION COMPONENT_STAGING_VERSION \
    COMPONENT_GENERATED_PATHS COMPONENT_TREE COMPONENT_PATCHES COMPONENT_OVERLAY \
    COMPONENT_UPSTREAM_TAG COMPONENT_BASE_TAG COMPONENT_LINE COMPONENT_LINE_ENV COMPONENT_TREE_NAME COMPONENT_LINE_OVERLAY
}

# component::rel_patches: the loaded component's series folder, relative to
# the repository (patches/<c>/<line>), for messages.
component::rel_patches() { printf '%s\n' "${COMPONENT_PATCHES#"${REPO_ROOT}/"}"; }

# component::all: every component of the selected line, one a line (the
# folders build/*/ that hold a component.env and whose patches/<c>/ has the
# line), in dependency order: a component whose STAGING_FROM names another
# comes after it.
component::all() {
  local env c
  local -a first=() later=()
  for env in "${REPO_ROOT}"/build/*/component.env; do
    c="$(basename "$(dirname "${env}")")"
    component::has_line "${c}" || continue
    if [[ -n "$(component::setting "${c}" STAGING_FROM)" ]]; then later+=("${c}"); else first+=("${c}"); fi
  done
  printf '%s\n' "${first[@]}" "${later[@]}" | sed '/^$/d'
}

# component::named_or_all [NAME...]: the NAMEs, or every component when none
# is given, one a line: what a script's component arguments default to.
component::named_or_all() {
  if [[ $# -gt 0 ]]; then printf '%s\n' "$@"; else component::all; fi
}

# component::codegen_steps ALL_STEP... -- [STEP...]: the steps a codegen hook
# runs for its arguments (none or "all": every step of ALL_STEPS, in order),
# one a line; fails on a step the hook does not have.
component::codegen_steps() {
  local -a all=() asked=()
  while [[ $# -gt 0 && "$1" != -- ]]; do all+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  asked=("$@")
  [[ ${#asked[@]} -gt 0 ]] || asked=(all)
  local s
  for s in "${asked[@]}"; do
    if [[ "${s}" == all ]]; then
      printf '%s\n' "${all[@]}"
    elif [[ " ${all[*]} " == *" ${s} "* ]]; then
      printf '%s\n' "${s}"
    else
      fatal "unknown step '${s}': one of all ${all[*]}"
    fi
  done
}

# component::dependents NAME: the components built on NAME's patched tree
# (their STAGING_FROM is NAME), one a line.
component::dependents() {
  local c
  while read -r c; do
    [[ "$(component::setting "${c}" STAGING_FROM)" == "$1" ]] && echo "${c}"
  done < <(component::all)
  return 0
}

# component::recipe_id: one hash for everything that decides the loaded
# component's base commit: the module and versions it imports,
# materialize.sh and the component's overlays (its own and its line's).
component::recipe_id() {
  {
    printf '%s\n' "${COMPONENT_MODULE}@${COMPONENT_VERSION}" "staging@${COMPONENT_STAGING_VERSION}"
    cat "${REPO_ROOT}/hack/make-rules/materialize.sh"
    local o
    for o in "${COMPONENT_OVERLAY}" "${COMPONENT_LINE_OVERLAY}"; do
      [[ -d "${o}" ]] || continue
      # Files by content, symlinks by target.
      (cd "${o}" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
      (cd "${o}" && find . -type l -printf '%p -> %l\n' | LC_ALL=C sort)
    done
  } | sha256sum | cut -d' ' -f1
}

# component::is_generated PATH: whether PATH is a generated file of the loaded
# component (one of the globs in its GENERATED_PATHS; `*` matches `/` too).
component::is_generated() {
  local glob
  local -a globs=()
  read -ra globs <<<"${COMPONENT_GENERATED_PATHS}"
  for glob in "${globs[@]}"; do
    # shellcheck disable=SC2053
    [[ "$1" == ${glob} ]] && return 0
  done
  return 1
}

# component::setting NAME VAR: the value of VAR in build/NAME/component.env
# and the line.env of NAME's selected line (empty when they set none), read in
# a subshell where VAR starts unset, so neither the environment nor a
# component loaded before leaks into it. A component without the selected
# line has no settings on it (what component.env derives from the pin would
# be derived from nothing): that fails, naming the lines it has.
component::setting() {
  local env="${REPO_ROOT}/build/$1/component.env" line_env
  [[ -f "${env}" ]] || fatal "unknown component '$1': ${env} does not exist"
  line_env="$(component::line_env "$1")" || exit 1
  (
    unset "$2"
    UPSTREAM_VERSION=""
    # shellcheck disable=SC1090
    source "${line_env}"
    # shellcheck disable=SC1090
    source "${env}"
    printf '%s\n' "${!2:-}"
  )
}

# component::staging_modules GO_WORK: the names of the staging modules a
# go.work uses (its ./staging/src/k8s.io/<name> entries), one a line.
component::staging_modules() {
  sed -n 's#^[[:space:]]*\./staging/src/k8s.io/\([^[:space:]]*\)[[:space:]]*$#\1#p' "$1"
}

# component::git ARGS...: git inside the materialised tree, with stable settings.
component::git() {
  GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git -C "${COMPONENT_TREE}" \
    -c core.abbrev=12 -c diff.algorithm=myers -c diff.renames=true \
    -c format.signature= -c commit.gpgsign=false -c core.autocrlf=false \
    -c advice.detachedHead=false "$@"
}

# touched_go_dirs DIR BASE: the package directories (relative to DIR, sorted,
# one a line) of the files changed since BASE in the git checkout DIR. A
# changed file that is not Go code (testdata, fixtures) belongs to the nearest
# enclosing directory that holds Go files; "." stands for DIR itself.
touched_go_dirs() {
  local dir="$1" base="$2" f d
  GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git -C "${dir}" -c diff.renames=true \
    diff --name-only --diff-filter=d "${base}" -- | while read -r f; do
    d="$(dirname "${f}")"
    while [[ "${d}" != "." ]] && ! compgen -G "${dir}/${d}/*.go" >/dev/null; do
      d="$(dirname "${d}")"
    done
    if [[ "${d}" != "." ]] || compgen -G "${dir}/*.go" >/dev/null; then
      echo "${d}"
    fi
  done | LC_ALL=C sort -u
}

# component::list_file NAME: the non-comment, non-blank lines of
# build/<loaded component>/NAME, one a line; nothing when it does not exist.
component::list_file() {
  local f="${REPO_ROOT}/build/${COMPONENT_NAME}/$1"
  [[ -f "${f}" ]] || return 0
  sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^[[:space:]]*$/d' "${f}"
}

# component::skip_pattern [TOPIC...]: the `go test -skip` pattern for the
# loaded component's tests: its known-failures and, given the topics on the
# tree, the upstream-flakes ("<pattern> <fixing topic>") whose fixing topic
# is not among them (each logged on stderr). Empty when there is none.
component::skip_pattern() {
  local -a patterns=()
  local pattern fixer
  mapfile -t patterns < <(component::list_file known-failures)
  if (($# > 0)); then
    while read -r pattern fixer; do
      [[ " $* " == *" ${fixer} "* ]] && continue
      log "${COMPONENT_NAME}: skipping ${pattern}, an upstream flake that topic ${fixer} fixes" >&2
      patterns+=("${pattern}")
    done < <(component::list_file upstream-flakes)
  fi
  ((${#patterns[@]} == 0)) || (IFS='|' && printf '%s\n' "${patterns[*]}")
}

# component::is_materialised: the tree exists and has the base tag.
component::is_materialised() {
  [[ -e "${COMPONENT_TREE}/.git" ]] && component::git rev-parse -q --verify "refs/tags/${COMPONENT_BASE_TAG}" >/dev/null
}

# component::format_patches DIR: writes the commits base..HEAD of the tree into
# DIR in the reproducible format of patches/: zeroed From hash, full blob ids,
# no signature, no "n/m" numbering in subjects, files numbered from 0001.
component::format_patches() {
  local out="$1"
  mkdir -p "${out}"
  component::git format-patch --quiet --zero-commit --full-index --no-signature \
    --no-numbered --no-thread --no-cover-letter --start-number=1 --stat=80 \
    -o "${out}" "${COMPONENT_BASE_TAG}..HEAD"
}

# The series of a component is a list of topics (patches/<c>/<line>/topics, one
# name a line, in `git am` order); each topic is a folder patches/<c>/<line>/<topic>/
# with its patches (numbered from 0001 in the topic) and a TOPIC.md whose
# header (the "Key: value" lines after its title) says what the topic is:
#   Upstream-Status: not-proposed | proposal-drafted | pr-open <URL> |
#                    merged <version> (drop on rebase)
#   KEP: or Bug: <URL> (or "none"), Gates: <gate>... or none,
#   Depends: <topic>... or none (topics it needs; they come before it).
# Every commit says its topic in a "Topic: <name>" trailer, which is how the
# export files it (component::export_series).

# component::topics: the loaded component's topics, in order, one a line.
component::topics() {
  local f="${COMPONENT_PATCHES}/topics"
  [[ -f "${f}" ]] || return 0
  sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^[[:space:]]*$/d' "${f}"
}

# component::topic_files TOPIC: that topic's patch files, in order.
component::topic_files() {
  find "${COMPONENT_PATCHES}/$1" -maxdepth 1 -type f -name '*.patch' 2>/dev/null | LC_ALL=C sort
}

# component::topic_field TOPIC KEY: the value of KEY in the header of
# patches/<c>/<line>/TOPIC/TOPIC.md (empty when it has none).
component::topic_field() {
  local f="${COMPONENT_PATCHES}/$1/TOPIC.md"
  [[ -f "${f}" ]] || return 0
  awk -v key="$2" 'NR == 1 { next } NR > 2 && /^$/ { exit } index($0, key ": ") == 1 { print substr($0, length(key) + 3) }' "${f}"
}

# component::topic_closure TOPIC...: the TOPICs and every topic they depend
# on (Depends, transitively), in the order of the list, one a line. Fails on a
# topic that is not in the list.
component::topic_closure() {
  local -A want=()
  local -a todo=("$@")
  local t d
  while ((${#todo[@]} > 0)); do
    t="${todo[0]}"
    todo=("${todo[@]:1}")
    [[ -z "${want[${t}]:-}" ]] || continue
    component::topics | grep -qxF -- "${t}" || fatal "$(component::rel_patches)/topics has no topic '${t}' (it has: $(component::topics | paste -sd' ' -))"
    want["${t}"]=1
    for d in $(component::topic_field "${t}" Depends); do
      [[ "${d}" == none ]] || todo+=("${d}")
    done
  done
  while read -r t; do
    [[ -z "${want[${t}]:-}" ]] || echo "${t}"
  done < <(component::topics)
}

# component::closure_files TOPIC: the patch files of TOPIC and of the topics
# it depends on, in `git am` order, one a line.
component::closure_files() {
  local t
  while read -r t; do
    component::topic_files "${t}"
  done < <(component::topic_closure "$1")
}

# component::patch_trailer FILE KEY: the values of the trailer KEY in the
# message of the patch FILE, one a line.
component::patch_trailer() {
  sed -n '/^$/,/^---$/p' "$1" | git interpret-trailers --parse | sed -n "s/^$2: //p"
}

# component::patch_name FILE: a patch file as patches/<c>/<line>/ names it,
# "<topic>/<NNNN-subject>.patch".
component::patch_name() {
  printf '%s\n' "${1#"${COMPONENT_PATCHES}/"}"
}

# component::export_series DIR: writes the commits base..HEAD of the tree
# into DIR/<topic>/ by their Topic trailers, numbered from 0001 in each topic
# (component::format_patches' format otherwise). Fails, saying what to do, on
# a commit without a topic, with a topic that is not in the list, or out of
# the list's order (the series applies topic after topic).
component::export_series() {
  local out="$1" tmp f t name i prev=-1 n
  local -a topics=()
  local -A index=() count=()
  mapfile -t topics < <(component::topics)
  for i in "${!topics[@]}"; do index["${topics[${i}]}"]="${i}"; done
  tmp="$(mktemp -d)"
  component::format_patches "${tmp}"
  for f in "${tmp}"/*.patch; do
    [[ -f "${f}" ]] || continue
    t="$(component::patch_trailer "${f}" Topic)"
    name="$(sed -n 's/^Subject: \[PATCH\] //p' "${f}")"
    if [[ -z "${t}" || "$(wc -l <<<"${t}")" -gt 1 ]]; then
      rm -rf "${tmp}"
      fatal "commit '${name}' in ${COMPONENT_TREE} needs one 'Topic: <name>' trailer (one of: ${topics[*]}; a new topic is a line in $(component::rel_patches)/topics and a $(component::rel_patches)/<name>/TOPIC.md): git commit --amend, see docs/development.md"
    fi
    if [[ -z "${index[${t}]:-}" ]]; then
      rm -rf "${tmp}"
      fatal "commit '${name}' says Topic: ${t}, which $(component::rel_patches)/topics does not list (add it there, with $(component::rel_patches)/${t}/TOPIC.md)"
    fi
    if ((index[${t}] < prev)); then
      rm -rf "${tmp}"
      fatal "commit '${name}' (topic ${t}) comes after commits of topic ${topics[${prev}]}, which $(component::rel_patches)/topics puts after ${t}: move it up to the end of its topic (git rebase -i in ${COMPONENT_TREE})"
    fi
    prev="${index[${t}]}"
    n=$((${count[${t}]:-0} + 1))
    count["${t}"]="${n}"
    mkdir -p "${out}/${t}"
    mv "${f}" "${out}/${t}/$(printf '%04d' "${n}")-$(basename "${f}" | cut -c6-)"
  done
  rm -rf "${tmp}"
}

# component::topic_worktree TOPIC [NAME]: a git worktree of the loaded
# component's tree at _output/src/NAME-<c> (default topic-test; next to the
# tree, so that a component's relative replaces still resolve), reset to its base tag and
# given the patches of TOPIC and of the topics it depends on with `git am`;
# prints its path. It keeps one path, so that the Go build cache serves the
# next topic; the materialised tree itself is not touched.
component::topic_worktree() {
  local topic="$1" dir
  local -a closure=() patches=()
  mapfile -t closure < <(component::topic_closure "${topic}")
  mapfile -t patches < <(component::closure_files "${topic}")
  dir="${OUTPUT_SRC}/${2:-topic-test}-${COMPONENT_TREE_NAME}"
  component::git worktree prune
  if ! component::git worktree list --porcelain | grep -qxF "worktree ${dir}"; then
    rm -rf "${dir}"
    component::git worktree add --quiet --detach "${dir}" "${COMPONENT_BASE_TAG}" >&2
  fi
  (
    COMPONENT_TREE="${dir}"
    component::git am --abort >/dev/null 2>&1 || true
    component::git checkout --quiet --force --detach "${COMPONENT_BASE_TAG}"
    component::git clean --quiet -fdx
    log "${COMPONENT_NAME}/${topic}: ${#patches[@]} patches of ${closure[*]} on ${COMPONENT_BASE_TAG} in ${dir#"${REPO_ROOT}/"}"
    component::git am --quiet --3way --keep-cr --committer-date-is-author-date "${patches[@]}" >&2 ||
      fatal "${COMPONENT_NAME}/${topic} does not apply with ${closure[*]} to ${COMPONENT_BASE_TAG} (the worktree ${dir} is left as it stopped; make verify checks this)"
  )
  printf '%s\n' "${dir}"
}

# component::series_id: one hash for the patch files of patches/<component>/<line>,
# in order, with their names.
component::series_id() {
  local f
  while read -r f; do
    component::patch_name "${f}"
    sha256sum <"${f}"
  done < <(component::series_files) | sha256sum | cut -d' ' -f1
}

# component::series_files: the patch files of every topic, topics in the
# order of the list.
component::series_files() {
  local t
  while read -r t; do
    component::topic_files "${t}"
  done < <(component::topics)
}

# Where the tree remembers the last time it was in step with patches/:
# "<HEAD commit> <series id>".
component::sync_file() { printf '%s/.git/patch-series-sync' "${COMPONENT_TREE}"; }

component::record_sync() {
  printf '%s %s\n' "$(component::git rev-parse HEAD)" "$(component::series_id)" >"$(component::sync_file)"
}

# component::check_no_local_work: fails when the tree has edits or commits that
# are not (yet) in patches/, because re-materialising or re-applying would lose them.
component::check_no_local_work() {
  # A tree of another release (its line's pin moved, or the tree of another
  # line where this one's belongs) holds work too: only no tree at all is
  # free to replace.
  [[ -d "${COMPONENT_TREE}/.git" ]] || return 0
  if [[ -n "$(component::git status --porcelain --untracked-files=no)" ]]; then
    fatal "${COMPONENT_TREE} has uncommitted edits: commit them there and run 'make export-patches COMPONENT=${COMPONENT_NAME}$(line::hint)', or discard them (FORCE=1 overrides)"
  fi
  component::has_unexported_commits || return 0
  component::is_materialised ||
    fatal "${COMPONENT_TREE} holds commits of another release than ${COMPONENT_VERSION} that were never exported (its HEAD is not the one it had when last in step with a series): export them from the line they belong to, or FORCE=1 to discard them"
  fatal "${COMPONENT_TREE} has commits that are not exported to $(component::rel_patches): run 'make export-patches COMPONENT=${COMPONENT_NAME}$(line::hint)' (or FORCE=1 to discard them)"
}

# component::has_unexported_commits: the tree's HEAD is neither its base (in
# a tree of the line's release) nor the commit it had when it was last in step
# with patches/.
component::has_unexported_commits() {
  local head recorded_head=""
  head="$(component::git rev-parse HEAD)"
  if component::is_materialised; then
    [[ "${head}" != "$(component::git rev-parse "${COMPONENT_BASE_TAG}^{commit}")" ]] || return 1
  fi
  if [[ -f "$(component::sync_file)" ]]; then
    read -r recorded_head _ <"$(component::sync_file)" || true
  fi
  [[ "${head}" != "${recorded_head}" ]]
}

# component::require_series_tree: materialises and patches the loaded
# component's tree if it is missing, then fails unless the tree carries exactly
# patches/<component>/<line> (what a benchmark of the series must measure).
component::require_series_tree() {
  if ! component::is_materialised; then
    log "${COMPONENT_TREE} is missing: materialising and applying $(component::rel_patches)"
    "${REPO_ROOT}/hack/make-rules/apply.sh" "${COMPONENT_NAME}"
  fi
  local recorded=""
  [[ -f "$(component::sync_file)" ]] && recorded="$(cat "$(component::sync_file)")"
  if [[ "${recorded}" != "$(component::git rev-parse HEAD) $(component::series_id)" ]] ||
    [[ -n "$(component::git status --porcelain --untracked-files=no)" ]]; then
    fatal "${COMPONENT_TREE} does not carry exactly $(component::rel_patches) (commits or edits not exported, or patches/ changed): run 'make apply COMPONENT=${COMPONENT_NAME}$(line::hint)' (or export your work first)"
  fi
}

# component::pristine_tree: where component::extract_pristine puts the loaded
# component's base tag (upstream plus the offline-build adjustments, no patches).
component::pristine_tree() { printf '%s/pristine/%s' "${OUTPUT_DIR}" "${COMPONENT_TREE_NAME}"; }

# component::extract_pristine: extracts the base tag of the materialised tree
# to component::pristine_tree, once per base commit; prints the directory.
component::extract_pristine() {
  local dir base
  dir="$(component::pristine_tree)"
  component::is_materialised || fatal "${COMPONENT_TREE} is not materialised: run 'make materialize COMPONENT=${COMPONENT_NAME}$(line::hint)'"
  base="$(component::git rev-parse "${COMPONENT_BASE_TAG}^{commit}")"
  if [[ "$(cat "${dir}/.pristine-base" 2>/dev/null || true)" != "${base}" ]]; then
    log "extracting ${COMPONENT_BASE_TAG} (${base:0:12}) to ${dir}"
    rm -rf "${dir}"
    mkdir -p "${dir}"
    component::git archive --format=tar "${base}" | tar -x -C "${dir}"
    echo "${base}" >"${dir}/.pristine-base"
  fi
  printf '%s\n' "${dir}"
}

line::check
GOTOOLCHAIN="$(line::toolchain "$(line::selected)")"
export GOTOOLCHAIN
