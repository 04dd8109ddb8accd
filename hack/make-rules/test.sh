#!/usr/bin/env bash
# `make test`: builds everything and the images (`make images`) of the newest
# release line, and what the tests of each older line run (its control plane
# and kubectl, and its pristine control plane; `make
# images LINE=<line>` and `make node-image LINE=<line>` build the rest, and
# docs/kind.md records them), then runs
#   0. `make verify` (hack/make-rules/verify/all.sh; SKIP_VERIFY="codegen ..."
#      skips checks); a line whose generators already ran clean on exactly
#      its current inputs (patches/<c>/<line>/codegen.verified, `make
#      update-codegen-verified`) is not regenerated again,
#   1. this repository's own Go tests (pipeline scripts, version stamps,
#      integration tests against the built etcd and control plane, the
#      upgrade across release lines and the downgrade to pristine upstream on
#      each line, with each older line's kube-apiserver built first), and
#   2. upstream's unit and integration tests of every package the patch series
#      touches (hack/make-rules/test-upstream.sh), on every release line (an
#      older line: LINE=<line>, in its own tree), and the topics in
#      build/<component>/release-modules on the pristine release with its
#      own go.mod (hack/make-rules/test-release-modules.sh), and
#   3. the end-to-end suite on a local cluster (hack/make-rules/e2e.sh;
#      SKIP_E2E=1 skips it), on every release line (an older line's cluster
#      runs what the line carries: LINE=<line>).
# What each line runs: the default line everything above; an older line its
# build, upstream tests and e2e; a line whose line.env says
# MAKE_TEST_SCOPE=unit (a preview, line 1.38) only the upstream unit tests
# of the packages its kubernetes series touches, to keep a cold CI run under
# its limit (its descheduler series is the default line's, tested there in
# full; make verify checks that it applies and its go.mod overlay). An
# older or preview line leaves out the touched packages its line.env lists
# in MAKE_TEST_SKIP_DIRS (a package whose test binary costs most of a phase
# to compile, or whose copy on the default line tests the same code).
# `make test LINE=<line>` runs that one line in full instead (its build,
# pristine control plane, verify, upstream unit and integration tests, e2e;
# this repository's own tests are the default line's and run with it only).
# Each phase's wall time is logged when it ends and summed up at the end
# (also in _output/test-phases.txt), so that a slow run says where its time
# went. The failed tests' own messages (hack/lib/testlog.sh) are printed
# after that summary, so that the end of a log that is cut in the middle
# still says why; each go test's whole output is kept in _output/test-logs/.
# It needs MIN_FREE_GIB (default 15) GiB free where the tree and the Go caches
# are (a cold run writes about that much): it first makes room by deleting the
# Go build cache's least recently used entries (GOCACHE_TRIM=0 does not), then
# refuses to start if that is still short.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/local.sh"
source "${REPO_ROOT}/hack/lib/testlog.sh"

trim_go_cache "${MIN_FREE_GIB:-15}"
require_free_disk "${MIN_FREE_GIB:-15}" "${OUTPUT_DIR}" "$(go env GOCACHE)" "$(go env GOMODCACHE)"

# phase NAME: ends the phase running (logging its wall time) and starts NAME;
# phase "" ends the last one.
phases=()
phase_name=""
phase_start="${SECONDS}"
phase() {
  if [[ -n "${phase_name}" ]]; then
    phases+=("$((SECONDS - phase_start)) s  ${phase_name}")
    log "${phase_name}: $((SECONDS - phase_start)) s"
  fi
  phase_name="$1"
  phase_start="${SECONDS}"
  [[ -z "${phase_name}" ]] || log "${phase_name}"
}
summary() {
  phase ""
  mkdir -p "${OUTPUT_DIR}"
  printf '%s\n' "${phases[@]}" "${SECONDS} s  make test" | tee "${OUTPUT_DIR}/test-phases.txt" >&2
  testlog::print_failures
}
trap summary EXIT
testlog::reset

# The lines this run covers, and how far: LINE=<line> that one in full;
# otherwise every line, each as far as its MAKE_TEST_SCOPE says.
default_line="$(line::default)"
if [[ -n "${LINE:-}" ]]; then
  lines=("${LINE}")
else
  mapfile -t lines < <(line::all)
fi
# scope LINE: full or unit (see the header).
scope() {
  if [[ -n "${LINE:-}" ]]; then
    echo full
    return
  fi
  local s
  s="$(line::env_value "$1" MAKE_TEST_SCOPE)"
  case "${s:-full}" in
  full | unit) echo "${s:-full}" ;;
  *) fatal "patches/*/$1/line.env: MAKE_TEST_SCOPE=${s} is neither full nor unit" ;;
  esac
}
with_default=false
[[ " ${lines[*]} " != *" ${default_line} "* ]] || with_default=true

if [[ "${with_default}" == true ]]; then
  phase "build: every component of the newest line, the tools, pristine upstream"
  "${REPO_ROOT}/hack/make-rules/build-all.sh"
else
  phase "build: the tools"
  "${REPO_ROOT}/hack/make-rules/tools.sh"
fi
# The other release lines: what their tests run, the binaries of a local
# cluster (their e2e), and their pristine control plane (PRISTINE_BINARIES),
# for the upgrade test across lines and the downgrade test of each line
# (test/integration/upgrade_lines_test.go, downgrade_test.go). Their node-side
# binaries and images are left to `make images LINE=<line>` (test/images
# checks the images of every line that has them).
for line in "${lines[@]}"; do
  [[ "${line}" != "${default_line}" && "$(scope "${line}")" == full ]] || continue
  phase "release line ${line}: build of its local cluster's binaries, its pristine control plane"
  LINE="${line}" "${REPO_ROOT}/hack/make-rules/build.sh" "${LOCAL_KUBE_BINARIES[@]}"
  LINE="${line}" "${REPO_ROOT}/hack/make-rules/build-pristine.sh"
done
if [[ "${with_default}" == true ]]; then
  # test/images checks the images of these binaries.
  phase "images"
  SKIP_BUILD=1 "${REPO_ROOT}/hack/make-rules/images.sh"
fi

export PATH="${OUTPUT_BIN}:${PATH}"
status=0
phase "make verify"
(unset LINE; CODEGEN_TRUST_RECORDED=1 "${REPO_ROOT}/hack/make-rules/verify/all.sh") || status=1
if [[ "${with_default}" == true ]]; then
  phase "this repository's tests"
  (cd "${REPO_ROOT}" && testlog::run repo go test -count=1 -timeout 30m ./...) || status=1
fi
for line in "${lines[@]}"; do
  if [[ "${line}" == "${default_line}" ]]; then
    phase "upstream tests of the packages the patch series touch"
    LINE="${line}" "${REPO_ROOT}/hack/make-rules/test-upstream.sh" || status=1
  elif [[ "$(scope "${line}")" == full ]]; then
    phase "release line ${line}: upstream tests of the packages its series touch"
    skip_dirs=""
    [[ -n "${LINE:-}" ]] || skip_dirs="$(line::env_value "${line}" MAKE_TEST_SKIP_DIRS)"
    LINE="${line}" TEST_UPSTREAM_SKIP_DIRS="${skip_dirs}" "${REPO_ROOT}/hack/make-rules/test-upstream.sh" || status=1
  else
    phase "release line ${line}: upstream unit tests of the packages its kubernetes series touches (MAKE_TEST_SCOPE=unit; make test LINE=${line} runs it in full)"
    # Its tree is applied here: no build of this line ran before (make
    # verify applies it too, but a SKIP_VERIFY run must not depend on that).
    (
      export LINE="${line}"
      "${REPO_ROOT}/hack/make-rules/apply.sh" kubernetes &&
        TEST_UPSTREAM_UNIT_ONLY=1 TEST_UPSTREAM_COMPONENTS=kubernetes \
          TEST_UPSTREAM_SKIP_DIRS="$(line::env_value "${line}" MAKE_TEST_SKIP_DIRS)" \
          "${REPO_ROOT}/hack/make-rules/test-upstream.sh"
    ) || status=1
  fi
done
if [[ "${with_default}" == true ]]; then
  phase "the topics that must stand on the pristine release with its own modules"
  "${REPO_ROOT}/hack/make-rules/test-release-modules.sh" || status=1
fi
if [[ "${SKIP_E2E:-0}" == "1" ]]; then
  log "SKIP_E2E=1: end-to-end tests skipped"
else
  for line in "${lines[@]}"; do
    if [[ "${line}" == "${default_line}" ]]; then
      phase "end-to-end tests on a local cluster"
    elif [[ "$(scope "${line}")" == full ]]; then
      phase "release line ${line}: end-to-end tests on a local cluster"
    else
      continue
    fi
    LINE="${line}" "${REPO_ROOT}/hack/make-rules/e2e.sh" || status=1
  done
fi
exit "${status}"
