#!/usr/bin/env bash
# `make bench`: runs upstream's scheduler_perf benchmarks on this machine, in
# one run, for three variants of kube-scheduler (and the in-process
# kube-apiserver scheduler_perf starts with it):
#   upstream   pristine upstream: the base/<version> tag of the tree (module
#              import plus the offline-build adjustments), extracted to
#              _output/pristine/kubernetes
#   gate-off   the patched tree, DisruptionPolicyInPriorityClass off
#   gate-on    the patched tree, DisruptionPolicyInPriorityClass on
# Every other gate is at its default in every variant. The eviction fast
# path (opt-in, EVICTION_FAST_PATH=1 in kube-guard's clusters) is measured as
# its own workload, VictimRemoval/ProtectedVictimFastPath
# (BenchmarkVictimRemovalFastPath, FAST_PATH_GATES below).
# and writes benchmarks/results.md (tables, ratios to upstream, goals),
# benchmarks/results.json (the same as data) and benchmarks/raw/ (the
# DataItems files scheduler_perf wrote, <variant>/round-<n>/<topic>.json).
#
# Workloads (BENCH_* below pick them, as TESTCASE/WORKLOAD of the tree's
# config, or TESTCASE/NAME=BASE:KEY=VALUE,... for workload BASE with other
# parameters, either optionally followed by @GATE=BOOL,... for feature gates
# of that workload; hack/benchreport config writes each variant's config):
#   default_preemption/PreemptionBasic, PreemptionAsync: upstream's, all three
#     variants. PreemptionBasic runs with synchronous preemption: with
#     asynchronous preemption most runs of it here had a preemptor parked
#     for the scheduler's 5-minute flush of unschedulable pods
#     (kubernetes/kubernetes#141694, upstream's), which makes a run last
#     minutes and its throughput meaningless. Synchronous preemption removes
#     the victims inside PostFilter, so its latency includes DELETE or
#     eviction. PreemptionAsync's measured pods do not preempt (the churned
#     preemptors do, asynchronously), so the preemption goroutine latency
#     comes from there. It runs on 1000 nodes (upstream's 500Nodes with
#     twice the nodes and low-priority pods, the same 500 measured pods):
#     the churn creates a preemptor every 200 ms, and once the preemptors
#     have taken enough nodes that a node holds two measured pods, they
#     preempt measured pods, which are never recreated, and the phase never
#     ends. On 500 nodes that took a phase of about 25 s, which three runs
#     at once on these two cores reach (a run stalled 10 minutes); on 1000
#     nodes it takes twice as many preemptors.
#   default_preemption/PreemptionPDB: PreemptionBasic with a
#     PodDisruptionBudget for every four victims (patch 0001, which converts
#     their selectors once per preemption attempt); it uses only upstream's
#     features, so upstream runs it too, from the patched tree's config and
#     templates. At 250 and 1000 nodes (as many budgets), to show how the
#     cost grows; upstream's dry run of one attempt at 1000 nodes takes
#     seconds, hence only 50 measured pods there.
#   disruption_policy/PreemptionProtected{Below,Above}Threshold: KEP-3280's
#     (patch 0017); upstream does not have them (nor the pod field and the
#     gate they use), so only gate-off and gate-on run them, and their ratios
#     are gate on / gate off. Above the threshold also at 1000 nodes and 1000
#     budgets, with 100 preemptors (below it, the workload's check needs
#     more preemptors than budgets: 2000 attempts would not fit a run).
# Every run has -perf-cpuprofile on: hack/benchreport run reads the CPU time
# of the process and its descendants (etcd) when scheduler_perf creates the
# profile at the start of the measured phase and when it closes it at the
# end, and the CPU time of the whole run from rusage; it also attributes the
# profile's samples to kube-scheduler (a stack through its code), which the
# KEP-3280 workloads' goals are decided on. The goals are decided
# on the CPU time per measured pod, which a shared machine measures where
# wall-clock time cannot; where perf stat counts instructions, the report
# also gives the instructions per measured pod of the whole run. The
# profiles are kept in _output/bench/run/profiles.
# Each run is a process of its own (one workload of one variant: the
# scheduler registers its metrics once per process, and no heap is carried
# over). Every round runs each workload once per variant. By default
# (BENCH_TOGETHER=1) the variants of a workload run at the same time, started
# in a rotated order (round 1: upstream, gate-off, gate-on; round 2:
# gate-off, gate-on, upstream; ...): a shared machine's speed changes from
# second to second, and runs at the same time see the same machine, so that
# the ratio of one round's runs holds where the ratio of runs one after the
# other does not (on these 2 cores, the ratio of identical code spread with a
# standard deviation of 1.6-2% over 5 rounds at the same time, 4-9% one after
# the other; docs/benchmarks.md). Each run then shares the cores with the
# others, so its absolute figures are those of a busier machine; the goals
# are ratios. This holds where the variants' measured phases overlap, so the
# runs of a round meet at a barrier at the end of their setups (the setups
# take different times): each config has a CPU profile named
# ${BARRIER_FILE}, started and stopped at once, and a sleep of
# ${BARRIER_SLEEP} right before the workload's measured part, and
# `benchreport run -barrier` stops each run's processes (SIGSTOP) in that
# sleep, after its benchmark closed the profile, until every run of the
# round has got there, then continues them all at once (held processes use no CPU; the report
# shows how long each was held and how far apart the phases started). A
# phase of a few seconds that started seconds after the others' ran on less
# contended cores (PreemptionAsync before the barrier; docs/benchmarks.md).
# With BENCH_TOGETHER=0 the variants run one after the other, in the same
# rotated order, without the barrier. The report gives the median, minimum
# and maximum over the rounds, and decides each goal on the median of the
# rounds' ratios.
#
# The tree must carry exactly patches/kubernetes (`make apply`); a missing
# tree is materialised and patched first. The scheduler_perf test binaries
# are built once per run (`go test -c`, Go's build cache makes it cheap when
# nothing changed). Re-running replaces _output/bench/run and the results.
#
# Knobs:
#   BENCH_ROUNDS=5            rounds
#   BENCH_TOGETHER=1          1: the variants of a workload run at the same
#                             time in each round; 0: one after the other
#   BENCH_BASIC, BENCH_ASYNC, BENCH_PDB, BENCH_PROTECTED, BENCH_PROTECTED_SCALE,
#   BENCH_PROTECTED_FAST_PATH  workloads (defaults below; BENCH_PDB is a list;
#                             BENCH_PROTECTED_FAST_PATH runs with the eviction
#                             fast path's gates on in both variants;
#                             set empty, a knob runs none of its workloads,
#                             e.g. BENCH_BASIC= BENCH_ASYNC= BENCH_PDB= for
#                             the KEP-3280 workloads alone)
#   BENCH_VICTIM_REMOVAL=400  victims per method of BenchmarkVictimRemoval,
#                             run once per round (0: not run)
#   BENCH_ARGS="..."          more flags for the scheduler_perf test binaries
#   BENCH_OUT=benchmarks      where results go
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
line::require_default "make bench"

BENCH_ROUNDS="${BENCH_ROUNDS:-5}"
BENCH_TOGETHER="${BENCH_TOGETHER:-1}"
BENCH_BASIC="${BENCH_BASIC-250Nodes_SyncPreemption=1000Nodes:initNodes=250,initPods=1000,measurePods=250@SchedulerAsyncPreemption=false}"
BENCH_ASYNC="${BENCH_ASYNC-1000Nodes_500Pods=500Nodes:initNodes=1000,initPods=4000}"
BENCH_PDB="${BENCH_PDB-250Nodes=500Nodes:initNodes=250,pdbs=250,initPods=1000,measurePods=100 1000Nodes_50Pods=1000Nodes:measurePods=50}"
BENCH_PROTECTED="${BENCH_PROTECTED-100Nodes}"
BENCH_VICTIM_REMOVAL="${BENCH_VICTIM_REMOVAL:-400}"
BENCH_PROTECTED_SCALE="${BENCH_PROTECTED_SCALE-1000Nodes_100Preemptors=1000Nodes:preemptors=100}"
BENCH_PROTECTED_FAST_PATH="${BENCH_PROTECTED_FAST_PATH-100Nodes_FastPath=100Nodes}"
BENCH_ARGS="${BENCH_ARGS:-}"
BENCH_OUT="${BENCH_OUT:-${REPO_ROOT}/benchmarks}"
[[ "${BENCH_ROUNDS}" =~ ^[1-9][0-9]*$ ]] || fatal "BENCH_ROUNDS must be a positive number, not '${BENCH_ROUNDS}'"
[[ "${BENCH_TOGETHER}" =~ ^[01]$ ]] || fatal "BENCH_TOGETHER must be 1 (the variants of a workload at the same time) or 0 (one after the other), not '${BENCH_TOGETHER}'"
[[ "${BENCH_VICTIM_REMOVAL}" =~ ^[0-9]+$ ]] || fatal "BENCH_VICTIM_REMOVAL must be a number of victims (0: none), not '${BENCH_VICTIM_REMOVAL}'"

component::load kubernetes
GATE=DisruptionPolicyInPriorityClass
PERF=test/integration/scheduler_perf
BENCH_DIR="${OUTPUT_DIR}/bench"
RUN="${BENCH_DIR}/run"
VARIANTS=(upstream gate-off gate-on)
# FAST_PATH_GATES: the gates of the eviction fast path (hack/lib/gates.sh,
# EVICTION_FAST_PATH=1; topic eviction-fast-path, alpha, off by default),
# set by BenchmarkVictimRemovalFastPath (victimRemovalGates in
# test/integration): named in the report.
FAST_PATH_GATES=(EvictionReadsBudgetsFromStorage=true EvictionWritesBudgetsToStorage=true EvictionListsBudgetsWhileReadingPod=true EvictionWritesConditionWithDeletion=true)
TOPICS=(default_preemption disruption_policy)
# The barrier before the measured part when the variants run at the same
# time: the name of its profile in a run's data directory (not *-cpu.prof,
# the measured phase's), and the sleep after it, in which benchreport run
# stops the processes (a third of it after the profile's close, so that
# the sleep has begun; a process held past the end of its sleep continues
# at once when released).
BARRIER_FILE=phase-barrier.prof
BARRIER_SLEEP=3s

# selections TOPIC: the workloads of TOPIC, one a line.
selections() {
  case "$1" in
    default_preemption)
      [[ -z "${BENCH_BASIC}" ]] || printf '%s\n' "PreemptionBasic/${BENCH_BASIC}"
      [[ -z "${BENCH_ASYNC}" ]] || printf '%s\n' "PreemptionAsync/${BENCH_ASYNC}"
      local w
      for w in ${BENCH_PDB}; do printf '%s\n' "PreemptionPDB/${w}"; done
      ;;
    disruption_policy)
      [[ -z "${BENCH_PROTECTED}" ]] || printf '%s\n' "PreemptionProtectedBelowThreshold/${BENCH_PROTECTED}" "PreemptionProtectedAboveThreshold/${BENCH_PROTECTED}"
      [[ -z "${BENCH_PROTECTED_SCALE}" ]] || printf '%s\n' "PreemptionProtectedAboveThreshold/${BENCH_PROTECTED_SCALE}"
      [[ -z "${BENCH_PROTECTED_FAST_PATH}" ]] || printf '%s\n' "PreemptionProtectedAboveThreshold/${BENCH_PROTECTED_FAST_PATH}@$(IFS=,; echo "${FAST_PATH_GATES[*]}")"
      ;;
  esac
}

# workload_of SELECTION: TESTCASE/NAME.
workload_of() {
  local tc="${1%%/*}" rest="${1#*/}"
  rest="${rest%%@*}"
  echo "${tc}/${rest%%=*}"
}

# runs VARIANT TOPIC: whether the variant runs the topic's workloads (none
# when the knobs select none of them).
runs() {
  [[ "$1" != upstream || "$2" != disruption_policy ]] && [[ -n "$(selections "$2")" ]]
}
[[ -n "$(selections default_preemption)$(selections disruption_policy)" || "${BENCH_VICTIM_REMOVAL}" != 0 ]] ||
  fatal "no workload selected: BENCH_BASIC, BENCH_ASYNC, BENCH_PDB, BENCH_PROTECTED, BENCH_PROTECTED_SCALE and BENCH_PROTECTED_FAST_PATH are empty and BENCH_VICTIM_REMOVAL is 0"

tree_of() {
  if [[ "$1" == upstream ]]; then echo "${UPSTREAM_TREE}"; else echo "${COMPONENT_TREE}"; fi
}

binary_of() {
  if [[ "$1" == upstream ]]; then echo "${BENCH_DIR}/bin/upstream-$2.test"; else echo "${BENCH_DIR}/bin/patched-$2.test"; fi
}

# --- the patched tree
component::require_series_tree
[[ -d "${COMPONENT_TREE}/${PERF}/disruption_policy" ]] || fatal "${COMPONENT_TREE}/${PERF}/disruption_policy is missing: $(component::rel_patches) lacks the KEP-3280 scheduler_perf workloads"

# --- pristine upstream: the base tag, extracted once per base commit
# (shared with hack/make-rules/build-pristine.sh)
base_commit="$(component::git rev-parse "${COMPONENT_BASE_TAG}^{commit}")"
UPSTREAM_TREE="$(component::extract_pristine)"

# --- binaries
mkdir -p "${BENCH_DIR}/bin"
log "building hack/benchreport"
(cd "${REPO_ROOT}" && go build -o "${BENCH_DIR}/bin/benchreport" ./hack/benchreport) || fatal "building hack/benchreport failed"
report_tool="${BENCH_DIR}/bin/benchreport"
for variant in upstream gate-on; do # gate-off uses the gate-on binary
  for topic in "${TOPICS[@]}"; do
    runs "${variant}" "${topic}" || continue
    bin="$(binary_of "${variant}" "${topic}")"
    log "building $(basename "${bin}") in $(tree_of "${variant}")"
    start=${SECONDS}
    (cd "$(tree_of "${variant}")" && GOFLAGS='' go test -c -o "${bin}" "./${PERF}/${topic}") ||
      fatal "building the scheduler_perf test binary of ${topic} in $(tree_of "${variant}") failed"
    log "  built in $((SECONDS - start)) s"
  done
done

# BenchmarkVictimRemoval (test/integration): the kube-apiserver's CPU per
# protected victim, deleted (gate off) or evicted (gate on), with the
# patched binaries of _output/bin (built here if missing or older); and
# BenchmarkVictimRemovalUpstream, the same eviction sent to pristine
# upstream's kube-apiserver (_output/bin/pristine) and to the patched one,
# eight removals in flight on each.
"${REPO_ROOT}/hack/make-rules/build.sh" kube-apiserver >/dev/null || fatal "building kube-apiserver failed"
[[ -x "${OUTPUT_BIN}/pristine/kube-apiserver" ]] || "${REPO_ROOT}/hack/make-rules/build-pristine.sh" kubernetes >/dev/null ||
  fatal "building pristine upstream's kube-apiserver failed"
log "building the BenchmarkVictimRemoval binary"
(cd "${REPO_ROOT}" && go test -c -o "${BENCH_DIR}/bin/integration.test" ./test/integration) || fatal "building test/integration failed"

# --- configs: <run>/configs/<variant>/<topic>/performance-config.yaml, with
# copies of the tree's templates next to it, as the relative paths in
# configs expect (copies: the runs do not depend on the tree any more).
rm -rf "${RUN}"
mkdir -p "${RUN}/configs" "${RUN}/raw" "${RUN}/logs"
for variant in "${VARIANTS[@]}"; do
  tree="$(tree_of "${variant}")"
  case "${variant}" in
    upstream) gate="${GATE}=unset" ;;
    gate-off) gate="${GATE}=false" ;;
    gate-on) gate="${GATE}=true" ;;
  esac
  gate_args=(-feature-gate "${gate}")
  mkdir -p "${RUN}/configs/${variant}"
  cp -r "${tree}/${PERF}/templates" "${RUN}/configs/${variant}/templates"
  for topic in "${TOPICS[@]}"; do
    runs "${variant}" "${topic}" || continue
    dir="${RUN}/configs/${variant}/${topic}"
    mkdir -p "${dir}"
    if [[ -d "${tree}/${PERF}/${topic}/templates" ]]; then
      cp -r "${tree}/${PERF}/${topic}/templates" "${dir}/templates"
    fi
    fallback=()
    if [[ "${variant}" == upstream ]]; then
      # Workloads the patches add and upstream can run (PreemptionPDB):
      # their test cases and templates come from the patched tree.
      fallback=(-fallback "${COMPONENT_TREE}/${PERF}/${topic}/performance-config.yaml")
      if [[ -d "${COMPONENT_TREE}/${PERF}/${topic}/templates" ]]; then
        mkdir -p "${dir}/templates"
        cp -rn "${COMPONENT_TREE}/${PERF}/${topic}/templates/." "${dir}/templates/"
      fi
    fi
    mapfile -t sels < <(selections "${topic}")
    barrier_args=()
    if [[ "${BENCH_TOGETHER}" == 1 ]]; then
      barrier_args=(-barrier "${BARRIER_FILE}" -barrier-sleep "${BARRIER_SLEEP}")
    fi
    "${report_tool}" config -in "${tree}/${PERF}/${topic}/performance-config.yaml" -out "${dir}/performance-config.yaml" \
      ${fallback[@]+"${fallback[@]}"} -pods-out "${dir}/measured-pods" \
      -collect-metrics ${barrier_args[@]+"${barrier_args[@]}"} "${gate_args[@]}" "${sels[@]}" || fatal "writing the ${variant} config of ${topic} failed"
  done
done

# --- rounds
export PATH="${OUTPUT_BIN}:${PATH}"
command -v etcd >/dev/null || fatal "etcd is not in ${OUTPUT_BIN}: run 'make tools'"
read -r -a extra_args <<<"${BENCH_ARGS}"
run_args=()
instructions="not counted: perf stat -e instructions does not count them on this machine"
if "${report_tool}" perf-works; then
  run_args=(-perf)
  instructions="perf stat -e instructions, of the whole run"
fi
# run_workload VARIANT TOPIC WORKLOAD ROUND [PARTIES]: one run of the
# workload, in a process of its own; its data go to
# ${RUN}/raw/VARIANT/round-ROUND. With PARTIES, it meets the other runs of
# the round (PARTIES in all) at the barrier before the measured part.
run_workload() {
  local variant="$1" topic="$2" workload="$3" round="$4" parties="${5:-}"
  local name="${variant}-round-${round}-${workload//\//-}"
  local data="${RUN}/data/${name}" pods start=${SECONDS} barrier=()
  if [[ -n "${parties}" ]]; then
    barrier=(-barrier "${BARRIER_FILE}" -barrier-sleep "${BARRIER_SLEEP}" -barrier-parties "${parties}"
      -barrier-dir "${RUN}/barriers/round-${round}-${workload//\//-}" -barrier-id "${variant}")
  fi
  mkdir -p "${data}" "${RUN}/logs/${name}" "${RUN}/raw/${variant}/round-${round}"
  pods="$(awk -v w="${workload}" '$1 == w {print $2}' "${RUN}/configs/${variant}/${topic}/measured-pods")"
  [[ -n "${pods}" ]] || fatal "no count of measured pods for ${workload} in ${RUN}/configs/${variant}/${topic}/measured-pods"
  # benchreport run measures the CPU time of the measured phase, which
  # -perf-cpuprofile marks with the creation and close of its profile.
  if ! (cd "${RUN}/configs/${variant}/${topic}" &&
    KUBE_CACHE_MUTATION_DETECTOR=false ARTIFACTS="${RUN}/logs/${name}" \
      "${report_tool}" run -watch "${data}" -out "${RUN}/raw/${variant}/round-${round}/${workload//\//_}.cpu.json" \
      -name "${workload}" -pods "${pods}" ${run_args[@]+"${run_args[@]}"} ${barrier[@]+"${barrier[@]}"} -- \
      "$(binary_of "${variant}" "${topic}")" -test.run '^$' -test.bench "^BenchmarkPerfScheduling\$/^${workload%%/*}\$/^${workload#*/}\$" \
      -test.benchtime 1x -test.timeout 60m -perf-scheduling-label-filter=bench -data-items-dir "${data}" \
      -perf-cpuprofile ${extra_args[@]+"${extra_args[@]}"}) >"${RUN}/logs/${name}.log" 2>&1; then
    fatal "round ${round}, ${variant}, ${workload} failed after $((SECONDS - start)) s: see ${RUN}/logs/${name}.log and ${RUN}/logs/${name}/"
  fi
  local results=("${data}"/BenchmarkPerfScheduling_benchmark_*.json)
  [[ -f "${results[0]}" ]] || fatal "round ${round}, ${variant}, ${workload}: scheduler_perf wrote no results (${RUN}/logs/${name}.log)"
  grep -q "^BenchmarkPerfScheduling/${workload}-" "${RUN}/logs/${name}.log" ||
    fatal "round ${round}, ${variant}, ${workload}: the workload did not run (${RUN}/logs/${name}.log)"
  mv "${results[0]}" "${RUN}/raw/${variant}/round-${round}/${workload//\//_}.json"
}

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
date_start="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
bench_start=${SECONDS}
orders=()
for ((round = 1; round <= BENCH_ROUNDS; round++)); do
  order=()
  for ((i = 0; i < ${#VARIANTS[@]}; i++)); do
    order+=("${VARIANTS[$(((round - 1 + i) % ${#VARIANTS[@]}))]}")
  done
  orders+=("round ${round}: ${order[*]}")
  for topic in "${TOPICS[@]}"; do
    mapfile -t sels < <(selections "${topic}")
    for sel in "${sels[@]}"; do
      workload="$(workload_of "${sel}")"
      if [[ "${BENCH_TOGETHER}" == 1 ]]; then
        # The variants of the workload at the same time, started in the
        # round's order, their measured parts started together at the
        # barrier: each sees the same machine.
        pids=()
        names=()
        start=${SECONDS}
        parties=0
        for variant in "${order[@]}"; do
          if runs "${variant}" "${topic}"; then parties=$((parties + 1)); fi
        done
        for variant in "${order[@]}"; do
          runs "${variant}" "${topic}" || continue
          run_workload "${variant}" "${topic}" "${workload}" "${round}" "${parties}" &
          pids+=("$!")
          names+=("${variant}")
        done
        failed=()
        for i in "${!pids[@]}"; do
          wait "${pids[${i}]}" || failed+=("${names[${i}]}")
        done
        ((${#failed[@]} == 0)) || fatal "round ${round}, ${workload}: ${failed[*]} failed (the variants ran at the same time; the others finished)"
        log "round ${round}/${BENCH_ROUNDS}: ${names[*]} of ${workload} at the same time in $((SECONDS - start)) s"
      else
        for variant in "${order[@]}"; do
          runs "${variant}" "${topic}" || continue
          start=${SECONDS}
          run_workload "${variant}" "${topic}" "${workload}" "${round}"
          log "round ${round}/${BENCH_ROUNDS}: ${variant} ${workload} in $((SECONDS - start)) s"
        done
      fi
    done
  done
  if [[ "${BENCH_VICTIM_REMOVAL}" != "0" ]]; then
    start=${SECONDS}
    out="${RUN}/data/victim-removal-round-${round}"
    mkdir -p "${out}" "${RUN}/raw/gate-off/round-${round}" "${RUN}/raw/gate-on/round-${round}" "${RUN}/raw/upstream/round-${round}"
    (cd "${REPO_ROOT}" && KUBE_GUARD_VICTIM_REMOVAL_OUT="${out}" "${BENCH_DIR}/bin/integration.test" -test.run '^$' \
      -test.bench '^BenchmarkVictimRemoval(FastPath|Upstream)?$' -test.benchtime "${BENCH_VICTIM_REMOVAL}x") >"${RUN}/logs/victim-removal-round-${round}.log" 2>&1 ||
      fatal "round ${round}: BenchmarkVictimRemoval failed: see ${RUN}/logs/victim-removal-round-${round}.log"
    for w in VictimRemoval_ProtectedVictim VictimRemoval_ProtectedVictimFastPath VictimRemoval_GuardedVictimAgainstUpstream; do
      mv "${out}/${w}-gate-off.json" "${RUN}/raw/gate-off/round-${round}/${w}.json"
      mv "${out}/${w}-gate-on.json" "${RUN}/raw/gate-on/round-${round}/${w}.json"
    done
    mv "${out}/VictimRemoval_GuardedVictimAgainstUpstream-upstream.json" "${RUN}/raw/upstream/round-${round}/VictimRemoval_GuardedVictimAgainstUpstream.json"
    log "round ${round}/${BENCH_ROUNDS}: BenchmarkVictimRemoval (${BENCH_VICTIM_REMOVAL} victims per method) in $((SECONDS - start)) s"
  fi
done
elapsed=$((SECONDS - bench_start))
mkdir -p "${RUN}/profiles"
for d in "${RUN}"/data/*/; do
  for f in "${d}"*-cpu.prof; do
    if [[ -f "${f}" ]]; then mv "${f}" "${RUN}/profiles/$(basename "${d}").prof"; fi
  done
done
log "CPU profiles of the measured phases in ${RUN}/profiles (go tool pprof -top <files>)"

# --- report
together_text="the variants of a workload one after the other, in the order"
report_args=()
if [[ "${BENCH_TOGETHER}" == 1 ]]; then
  together_text="the variants of a workload at the same time, their measured parts started together at a barrier after their setups (${BARRIER_SLEEP} sleep), the runs started in the order"
  report_args=(-together)
fi
repo_commit="$(git -C "${REPO_ROOT}" rev-parse --short=12 HEAD)"
[[ -z "$(git -C "${REPO_ROOT}" status --porcelain --untracked-files=no)" ]] || repo_commit+=" (with uncommitted edits)"
describe_selections() {
  local topic
  for topic in "${TOPICS[@]}"; do
    selections "${topic}"
  done | paste -sd';' - | sed 's/;/; /g'
}
meta=(
  -meta "date (UTC)=${date_start}, ${elapsed} s for the rounds ($((elapsed / 60)) min $((elapsed % 60)) s)"
  -meta "command=make bench (BENCH_ROUNDS=${BENCH_ROUNDS}, BENCH_TOGETHER=${BENCH_TOGETHER}${BENCH_ARGS:+, BENCH_ARGS=${BENCH_ARGS}})"
  -meta "machine=$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr), $(go version | cut -d' ' -f3)"
  -meta "load average (1/5/15 min)=${load_start} at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end: the machine is shared, other builds may have run during the rounds"
  -meta "upstream=${COMPONENT_MODULE} ${COMPONENT_VERSION}, tag ${COMPONENT_BASE_TAG} (${base_commit:0:12})"
  -meta "patched=$(component::series_files | wc -l) patches of $(component::rel_patches) on it (tree HEAD $(component::git rev-parse --short=12 HEAD)); kube-guard commit ${repo_commit}"
  -meta "workloads=$(describe_selections) (TESTCASE/NAME=BASE:PARAMS is workload BASE of the tree's ${PERF}/<topic>/performance-config.yaml with those parameters)"
  -meta "variants=upstream: pristine; gate off / gate on: patched, ${GATE} set on every workload, every other gate at its default; VictimRemoval/ProtectedVictimFastPath: the kube-apiserver with the eviction fast path, $(IFS=,; echo "${FAST_PATH_GATES[*]}") (opt-in, EVICTION_FAST_PATH=1 in kube-guard's clusters; nothing of a DELETE); PreemptionProtected* are patched-only (upstream lacks the pod field), so their ratios are gate on / gate off; PreemptionPDB is added by patch 0001 and uses only upstream's features: upstream runs it from the patched tree's config and templates; VictimRemoval/GuardedVictimAgainstUpstream: the gate on's removal of a guarded victim (eviction, then the scheduler's condition) sent to pristine upstream's kube-apiserver (upstream) and to the patched one at default gates (gate on), the patched one's DELETE, on a third kube-apiserver with its own etcd, as gate off"
  -meta "CPU time=user + system time of the benchmark process and its descendants (etcd), read from /proc when scheduler_perf creates and closes the CPU profile of the measured phase (-perf-cpuprofile, on in every run), and from rusage for the whole run (hack/benchreport run); instructions: ${instructions}"
  -meta "rounds=${BENCH_ROUNDS}, one run of each workload and variant per round, ${together_text} $(printf '%s\n' "${orders[@]}" | paste -sd';' - | sed 's/;/; /g')"
)
mkdir -p "${BENCH_OUT}"
"${report_tool}" report ${report_args[@]+"${report_args[@]}"} -raw "${RUN}/raw" -md "${RUN}/results.md" -json "${RUN}/results.json" "${meta[@]}" ||
  fatal "writing the report failed"
rm -rf "${BENCH_OUT}/raw"
cp -r "${RUN}/raw" "${BENCH_OUT}/raw"
cp "${RUN}/results.md" "${RUN}/results.json" "${BENCH_OUT}/"
log "benchmarks done in ${elapsed} s: ${BENCH_OUT#"${REPO_ROOT}/"}/results.md"
