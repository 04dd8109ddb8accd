#!/usr/bin/env bash
# `make rebase-report`: for every component, tries its patch series on each
# upstream release the Go module proxy serves that is newer than the pin
# (the patch releases of the pinned minor, and the releases of the next minor
# once this machine's Go can build them), and writes docs/rebase-report.md:
# per release, whether the series applies (and which patches conflict, in
# which files; which apply empty because upstream merged them; which had
# generated files regenerated), whether the component builds, and which of
# upstream's tests of the touched packages fail.
#
# Every try runs in a scratch copy of this repository (hack/, build/,
# patches/) with its own OUTPUT_DIR: the checkout and _output/ are never
# changed. A hand conflict is recorded and the patch skipped, so that the
# report lists every conflicting patch, not only the first.
#
# Usage: rebase-report.sh
#   REPORT_COMPONENTS="kubernetes descheduler"   (default: every component)
#   REPORT_BUILD=0 / REPORT_TEST=0               skip the build / the tests
#   REPORT_VERSIONS="vX.Y.Z"                     try these instead of asking the proxy
#   REPORT_OUT=docs/rebase-report.md
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

out="${REPORT_OUT:-${REPO_ROOT}/docs/rebase-report.md}"
go_version="$(go env GOVERSION)"
go_version="${go_version#go}"

# version_lt A B: semver A < B (pre-releases before their release).
version_lt() {
  [[ "$1" != "$2" ]] || return 1
  local a="${1#v}" b="${2#v}"
  local ar="${a%%-*}" br="${b%%-*}"
  if [[ "${ar}" == "${br}" ]]; then
    # Same release: a pre-release sorts before the release itself.
    [[ "${a}" == *-* && "${b}" != *-* ]] && return 0
    [[ "${a}" != *-* && "${b}" == *-* ]] && return 1
  fi
  [[ "$(printf '%s\n%s\n' "${a}" "${b}" | sort -V | head -n1)" == "${a}" ]]
}

# go_at_least NEED: this machine's Go is at least NEED (a go.mod go line).
go_at_least() { ! version_lt "v${go_version}" "v$1"; }

# candidates: the newer releases of the loaded component worth trying, one a
# line: same minor (patch releases), or the next minor.
candidates() {
  local tmp v major minor next
  [[ "${COMPONENT_VERSION}" =~ ^v([0-9]+)\.([0-9]+)\. ]] || fatal "cannot parse ${COMPONENT_VERSION}"
  major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}"
  # The next minor, unless a newer release line carries the series already
  # (an older line only follows its own patch releases).
  next="|$((minor + 1))"
  [[ "${COMPONENT_LINE}" == "$(component::lines "${COMPONENT_NAME}" | tail -n1)" ]] || next=""
  if [[ -n "${REPORT_VERSIONS:-}" ]]; then
    # The versions asked for that this line would follow.
    tr ' ' '\n' <<<"${REPORT_VERSIONS}" | sed '/^$/d' | grep -E "^v${major}\.(${minor}${next})\." || true
    return
  fi
  tmp="$(mktemp -d)"
  (cd "${tmp}" && GOWORK=off GOFLAGS=-mod=mod go list -m -versions -json "${COMPONENT_MODULE}") | jq -r '.Versions[]?' |
    while read -r v; do
      [[ "${v}" =~ ^v${major}\.(${minor}${next})\. ]] || continue
      version_lt "${COMPONENT_VERSION}" "${v}" && echo "${v}"
    done
  rm -rf "${tmp}"
}

# go_needed VERSION: the go line of the component's go.mod at VERSION.
go_needed() {
  local tmp
  tmp="$(mktemp -d)"
  (cd "${tmp}" && GOWORK=off GOFLAGS=-mod=mod go list -m -json "${COMPONENT_MODULE}@$1" 2>/dev/null) | jq -r '.GoVersion // empty'
  rm -rf "${tmp}"
}

# try VERSION: one row of the table for the loaded component.
try() {
  local v="$1" scratch log rc=0 need applies="" conflicts="" dropped="" regenerated="" builds="-" tests="-"
  need="$(go_needed "${v}")"
  if [[ -n "${need}" ]] && ! go_at_least "${need}"; then
    printf '| %s | %s | %s | not tried: its go.mod needs Go %s, this machine has %s | - | - |\n' "${COMPONENT_LINE}" "${COMPONENT_NAME}" "${v}" "${need}" "${go_version}"
    return
  fi
  scratch="$(mktemp -d)"
  cp -R "${REPO_ROOT}/hack" "${REPO_ROOT}/build" "${REPO_ROOT}/patches" "${scratch}/"
  # The scratch repository starts from the current trees (git objects shared),
  # so that `git am --3way` has the old release to merge against.
  mkdir -p "${scratch}/_output/src"
  local c t
  while read -r c; do
    t="$(component::load "${c}" && echo "${COMPONENT_TREE_NAME}")"
    if [[ -d "${OUTPUT_SRC}/${t}/.git" ]]; then
      git clone --quiet --shared --no-checkout "${OUTPUT_SRC}/${t}" "${scratch}/_output/src/${t}"
      git -C "${scratch}/_output/src/${t}" fetch --quiet --tags "${OUTPUT_SRC}/${t}" "+refs/heads/*:refs/heads/*" 2>/dev/null || true
      git -C "${scratch}/_output/src/${t}" checkout --quiet --force main
      cp "${OUTPUT_SRC}/${t}/.git/patch-series-sync" "${OUTPUT_SRC}/${t}/.git/materialized-recipe" "${scratch}/_output/src/${t}/.git/" 2>/dev/null || true
    fi
  done < <(component::all)
  t="${scratch}/_output/src/${COMPONENT_TREE_NAME}"
  log="${scratch}/rebase.log"
  local tries=0 new_line=""
  # A line named after its pin's minor moves to another minor as a new line
  # (make rebase NEW_LINE=<minor>), which takes the newest tree's path.
  if [[ "${COMPONENT_VERSION}" == "v${COMPONENT_LINE}."* && "${v}" =~ ^v([0-9]+)\.([0-9]+)\. ]] &&
    [[ "${v}" != "v${COMPONENT_LINE}."* ]]; then
    new_line="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
    t="${scratch}/_output/src/${COMPONENT_NAME}"
  fi
  env OUTPUT_DIR="${scratch}/_output" REBASE_VERIFY_CODEGEN=0 NEW_LINE="${new_line}" \
    bash "${scratch}/hack/make-rules/rebase.sh" "${COMPONENT_NAME}" "${v}" >"${log}" 2>&1 || rc=$?
  # Record every hand conflict, skip the patch, go on.
  while [[ "${rc}" -ne 0 ]] && [[ -d "${t}/.git/rebase-apply" ]] && [[ "${tries}" -lt 100 ]]; do
    local patch files
    patch="$(sed -n 's#^!!! patches/[^/]*/[^/]*/\([^ ]*\) does not apply.*#\1#p' "${log}" | tail -n1)"
    files="$(git -C "${t}" diff --name-only --diff-filter=U | paste -sd' ')"
    conflicts+="${conflicts:+; }${patch%.patch}: ${files:-does not apply}"
    git -C "${t}" am --skip >/dev/null 2>&1 || true
    rc=0
    env OUTPUT_DIR="${scratch}/_output" REBASE_VERIFY_CODEGEN=0 NEW_LINE="${new_line}" \
      bash "${scratch}/hack/make-rules/rebase.sh" "${COMPONENT_NAME}" "${v}" >>"${log}" 2>&1 || rc=$?
    tries=$((tries + 1))
  done
  dropped="$(sed -n 's#^+++ \([^:]*\)\.patch: upstream .* already has this change.*#\1#p' "${log}" | grep -v -F -e "${conflicts:-@@none@@}" | paste -sd' ')"
  regenerated="$(sed -n 's#^    regenerated: ##p' "${log}" | head -n1 | sed 's/\.patch//g')"
  if [[ "${rc}" -ne 0 ]]; then
    applies="no: $(grep '^!!!' "${log}" | tail -n1 | sed 's/^!!! //' | cut -c1-160)"
  elif [[ -n "${conflicts}" ]]; then
    applies="conflicts: ${conflicts}"
  else
    applies="yes"
  fi
  [[ -z "${dropped}" ]] || applies+="; applies empty (upstream has it): ${dropped}"
  [[ -z "${regenerated}" ]] || applies+="; regenerated: ${regenerated}"
  if [[ "${rc}" -eq 0 && "${REPORT_BUILD:-1}" == 1 ]]; then
    # Its binaries; a component that declares none: every package compiles.
    local -a build=(env OUTPUT_DIR="${scratch}/_output" LINE="${new_line:-${LINE}}" SKIP_APPLY=1 bash "${scratch}/hack/make-rules/build.sh" "${COMPONENT_NAME}")
    [[ -n "$(component::setting "${COMPONENT_NAME}" BINARIES)" ]] ||
      build=(env -C "${t}" GOFLAGS='' go build ./...)
    if "${build[@]}" >>"${log}" 2>&1; then
      builds="yes"
    else
      builds="no"
    fi
  fi
  if [[ "${builds}" == yes && "${REPORT_TEST:-1}" == 1 ]]; then
    local failed
    if OUTPUT_DIR="${scratch}/_output" LINE="${new_line:-${LINE}}" TEST_UPSTREAM_COMPONENTS="${COMPONENT_NAME}" \
      bash "${scratch}/hack/make-rules/test-upstream.sh" >"${scratch}/test.log" 2>&1; then
      tests="pass"
    else
      failed="$(sed -n 's/^[[:space:]]*--- FAIL: \([^ ]*\).*/\1/p' "${scratch}/test.log" | sort -u | head -n 20 | paste -sd' ')"
      tests="fail: ${failed:-see the log}"
    fi
  fi
  printf '| %s | %s | %s | %s | %s | %s |\n' "${COMPONENT_LINE}" "${COMPONENT_NAME}" "${v}" "${applies}" "${builds}" "${tests}"
  rm -rf "${scratch}"
}

rows=()
header=()
for line in $(line::all | sort -rV); do
  export LINE="${line}"
  mapfile -t components < <(if [[ -n "${REPORT_COMPONENTS:-}" ]]; then
    for c in ${REPORT_COMPONENTS}; do component::has_line "${c}" && echo "${c}"; done
  else component::all; fi)
  for c in "${components[@]}"; do
    component::load "${c}"
    header+=("line ${line}: ${c} ${COMPONENT_VERSION} (series $(component::series_id | cut -c1-12))")
    mapfile -t versions < <(candidates)
    if [[ ${#versions[@]} -eq 0 ]]; then
      rows+=("| ${line} | ${c} | - | no newer release of ${COMPONENT_MODULE} served (patch releases of ${COMPONENT_VERSION%.*}$([[ "${line}" != "$(component::lines "${c}" | tail -n1)" ]] || echo ", or the next minor")) | - | - |")
      continue
    fi
    for v in "${versions[@]}"; do
      log "${c} (line ${line}): trying the series on ${v}"
      rows+=("$(try "${v}")")
      component::load "${c}"
    done
  done
done

mkdir -p "$(dirname "${out}")"
{
  echo "<!-- Generated by hack/make-rules/rebase-report.sh (make rebase-report); do not edit. -->"
  echo "# Rebase report"
  echo
  echo "Each patch series tried on the upstream releases newer than its pin that the Go module proxy serves."
  echo "Written by \`make rebase-report\` in a scratch copy, for every release line; \`make rebase COMPONENT=<c> [LINE=<line>] TO=<version>\` does it for real (docs/REBASE.md)."
  echo
  for h in "${header[@]}"; do
    echo "- pin: ${h}"
  done
  echo "- Go on this machine: ${go_version}"
  echo
  echo "| line | component | release | applies | builds | upstream tests of the touched packages |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"${out}.tmp"
mv "${out}.tmp" "${out}"
log "wrote ${out#"${REPO_ROOT}/"}"
