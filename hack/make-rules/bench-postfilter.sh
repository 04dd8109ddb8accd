#!/usr/bin/env bash
# `make bench-postfilter`: runs BenchmarkPostFilterDisruptionPolicy (patch
# "defaultpreemption: benchmark PostFilter with DisruptionPolicyInPriorityClass
# off and on") from the patched tree and compares the gate off with the gate
# on with benchstat (pinned in hack/tools/benchstat).
#
# One iteration is one synchronous preemption by DefaultPreemption.PostFilter
# on one goroutine, in a cluster that does not change between iterations, so
# its time is CPU time of the preemption alone: it decides a few percent
# where scheduler_perf's whole runs (make bench) cannot, because their work
# depends on how many attempts each preemptor takes. The benchmark binary
# runs BENCH_POSTFILTER_COUNT times with -test.count 1 (go test's -count
# repeats each sub-benchmark back to back), so that the gate-off and gate-on
# runs of a workload alternate and a shared machine's noise falls on both.
#
# Writes ${BENCH_OUT}/postfilter.txt (the benchmark's output) and
# ${BENCH_OUT}/postfilter.md (benchstat's comparison, with the command).
#
# Knobs:
#   BENCH_POSTFILTER_COUNT=10   runs of each benchmark
#   BENCH_OUT=benchmarks        where results go
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

BENCH_POSTFILTER_COUNT="${BENCH_POSTFILTER_COUNT:-10}"
BENCH_OUT="${BENCH_OUT:-${REPO_ROOT}/benchmarks}"
[[ "${BENCH_POSTFILTER_COUNT}" =~ ^[1-9][0-9]*$ ]] || fatal "BENCH_POSTFILTER_COUNT must be a positive number, not '${BENCH_POSTFILTER_COUNT}'"

component::load kubernetes
PKG=pkg/scheduler/framework/plugins/defaultpreemption
BENCH=BenchmarkPostFilterDisruptionPolicy

component::require_series_tree
grep -q "^func ${BENCH}(" "${COMPONENT_TREE}/${PKG}"/*_test.go ||
  fatal "${COMPONENT_TREE}/${PKG} has no ${BENCH}: $(component::rel_patches) lacks it"

"${REPO_ROOT}/hack/make-rules/tools.sh" benchstat

bin="${OUTPUT_DIR}/bench/bin/postfilter.test"
mkdir -p "$(dirname "${bin}")" "${BENCH_OUT}"
log "building ${PKG} tests of the patched tree"
(cd "${COMPONENT_TREE}" && GOFLAGS='' go test -c -o "${bin}" "./${PKG}")

raw="${BENCH_OUT}/postfilter.txt"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
log "running ${BENCH} ${BENCH_POSTFILTER_COUNT} times (a few minutes)"
start="$(date +%s)"
# The benchmark's logs go to stderr; benchstat reads stdout.
: >"${raw}"
for ((i = 1; i <= BENCH_POSTFILTER_COUNT; i++)); do
  (cd "${COMPONENT_TREE}/${PKG}" &&
    "${bin}" -test.run '^$' -test.bench "^${BENCH}\$" -test.benchmem -test.count 1 2>/dev/null) >>"${raw}" ||
    fatal "${BENCH} failed in run ${i}: see ${raw}"
done
[[ "$(grep -c '^PASS$' "${raw}")" == "${BENCH_POSTFILTER_COUNT}" ]] || fatal "${BENCH} did not pass every run: see ${raw}"
elapsed=$(($(date +%s) - start))

report="${BENCH_OUT}/postfilter.md"
{
  echo "<!-- Written by hack/make-rules/bench-postfilter.sh (make bench-postfilter); do not edit. -->"
  echo "# One preemption, DisruptionPolicyInPriorityClass off vs on"
  echo
  echo "\`${BENCH}\` (${PKG}_test, patch \"defaultpreemption: benchmark PostFilter with DisruptionPolicyInPriorityClass off and on\"):"
  echo "one synchronous preemption by DefaultPreemption.PostFilter per iteration, on one goroutine, in a cluster that"
  echo "does not change (writes accepted and not applied): sec/op is the CPU time of one preemption."
  echo "Columns: gate off, gate on; vs base is gate on against gate off, with benchstat's p-value and number of runs."
  echo
  echo "- command: \`make bench-postfilter\` (BENCH_POSTFILTER_COUNT=${BENCH_POSTFILTER_COUNT}), ${elapsed} s"
  echo "- machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(uname -sr), $(go version | cut -d' ' -f3)"
  echo "- load average (1/5/15 min): ${load_start} at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end (shared machine)"
  echo "- patched tree: $(component::series_files | wc -l) patches of $(component::rel_patches) on ${UPSTREAM_VERSION} (tree HEAD $(component::git rev-parse --short=12 HEAD)); kube-guard commit $(git -C "${REPO_ROOT}" rev-parse --short=12 HEAD)"
  echo "- raw output: [postfilter.txt](postfilter.txt)"
  echo
  echo '```'
  "${OUTPUT_BIN}/benchstat" -col /gate "${raw}"
  echo '```'
} >"${report}"
log "wrote ${report#"${REPO_ROOT}/"} and ${raw#"${REPO_ROOT}/"}"
