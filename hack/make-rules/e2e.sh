#!/usr/bin/env bash
# `make e2e`: runs test/e2e against local clusters it brings up and down itself:
#   1. `local-up` with LOCAL_FEATURE_GATES (default: the gates of the line's
#      KEPs, CLUSTER_GATES in patches/kubernetes/<line>/line.env, such as
#      DisruptionPolicyInPriorityClass and EvictionRequestAPI on,
#      hack/lib/gates.sh), the whole suite (gate-off tests skip),
#      including the descheduler's (it runs _output/bin/descheduler itself);
#   2. `local-up` again with DisruptionPolicyInPriorityClass=false, and
#      EvictionRequestAPI on without the runtime-config that serves its API
#      (a setup the components must refuse or report), only the gate-off
#      tests: by convention (test/e2e/doc.go), the tests whose names end in
#      GateOff (they call RequireGate(t, false) and skip in phase 1).
# LINE=<line> runs it on that release line's control plane. What the line
# does not carry is not run, and its tests may skip: the descheduler's
# (^TestDescheduler) on a line without a descheduler line, KEP-4563's
# (^TestKEP4563, EvictionRequestAPI) on a line whose CLUSTER_GATES lack
# EvictionRequestAPI.
# A local cluster that is already running is not touched: stop it first
# (`make local-down`). The cluster is brought down on exit, also on failure
# (KEEP_LOGS=1 keeps its component logs in _output/local-logs).
#
# Knobs: E2E_RUN (go test -run pattern of phase 1, default all),
# E2E_GATE_OFF=0 skips phase 2, E2E_TIMEOUT (default 20m), plus the
# local cluster's (hack/lib/local.sh).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/local.sh"
line="$(line::selected)"

E2E_RUN="${E2E_RUN:-.}"
E2E_GATE_OFF="${E2E_GATE_OFF:-1}"
E2E_TIMEOUT="${E2E_TIMEOUT:-20m}"
GATES_ON="${LOCAL_FEATURE_GATES}"
GATES_OFF=""
RUNTIME_CONFIG_ON="${LOCAL_RUNTIME_CONFIG}"
RUNTIME_CONFIG_OFF=""
# What the line lacks: its tests may skip (the names of test/e2e's tests).
LINE_SKIPS=""
if gates::is_on "${GATES_KEPS}" DisruptionPolicyInPriorityClass; then
  GATES_OFF="DisruptionPolicyInPriorityClass=false"
else
  # A line without KEP-3280 (the preview line 1.38 so far): its components
  # do not know the gate, and its clusters are upstream's preemption, which
  # the gate-off tests check in both phases.
  LINE_SKIPS+="|^TestKEP3280ProtectedPreemption"
fi
if gates::is_on "${GATES_KEPS}" EvictionRequestAPI; then
  GATES_OFF+="${GATES_OFF:+,}EvictionRequestAPI=true"
else
  LINE_SKIPS+="|^TestKEP4563|EvictionRequestAPI"
fi
DESCHEDULER=""
if component::has_line descheduler "${line}"; then
  DESCHEDULER="$(line::bin)/descheduler"
  [[ -x "${DESCHEDULER}" ]] || "${REPO_ROOT}/hack/make-rules/build.sh" descheduler
else
  log "release line ${line} has no descheduler line: its tests skip"
  LINE_SKIPS+="|^TestDescheduler|/the_descheduler_"
fi
if [[ -n "$(local::running_pids)" ]]; then
  fatal "a local cluster is running: make e2e brings up its own; stop it first with 'make local-down'"
fi
trap '"${REPO_ROOT}/hack/make-rules/local-down.sh"' EXIT

# e2e::phase NAME GATES RUNTIME_CONFIG RUN ALLOWED_SKIPS [SKIP]: brings up a cluster
# with GATES and the kube-apiserver's RUNTIME_CONFIG, runs the tests matching
# RUN (and not SKIP, go test -skip), brings the cluster down. A test that skips
# although its name does not match ALLOWED_SKIPS (an extended regular
# expression) fails the phase: a missing descheduler binary or an API the
# cluster does not serve must not pass for a green run.
e2e::phase() {
  local name="$1" gates="$2" runtime_config="$3" run="$4" allowed="$5" skip="${6:-}" start log skipped
  local -a skip_flag=()
  [[ -z "${skip}" ]] || skip_flag=(-skip "${skip}")
  log="${OUTPUT_DIR}/e2e/${name// /-}.log"
  mkdir -p "$(dirname "${log}")"
  log "e2e ${name}: cluster with --feature-gates=${gates} --runtime-config=${runtime_config}"
  start="$(date +%s)"
  LOCAL_FEATURE_GATES="${gates}" LOCAL_RUNTIME_CONFIG="${runtime_config}" "${REPO_ROOT}/hack/make-rules/local-up.sh"
  log "e2e ${name}: cluster up in $(($(date +%s) - start)) s"
  start="$(date +%s)"
  (
    cd "${REPO_ROOT}"
    KUBE_GUARD_E2E_KUBECONFIG="${LOCAL_KUBECONFIG}" \
      KUBE_GUARD_E2E_DESCHEDULER="${DESCHEDULER}" \
      KUBE_GUARD_E2E_SCHEDULER_URL="https://127.0.0.1:${LOCAL_SCHEDULER_PORT}" \
      KUBE_GUARD_E2E_COMPONENT_LOGS="${LOCAL_LOGS_DIR}" \
      go test ./test/e2e/... -count=1 -v -timeout "${E2E_TIMEOUT}" -run "${run}" "${skip_flag[@]}" 2>&1 | tee "${log}"
  ) || {
    local::report
    fatal "e2e ${name}: tests failed (component logs: ${LOCAL_LOGS_DIR}; KEEP_LOGS=1 keeps them)"
  }
  skipped="$(sed -nE 's/^ *--- SKIP: ([^ ]+) .*/\1/p' "${log}" | grep -vE "${allowed}" || true)"
  [[ -z "${skipped}" ]] || fatal "e2e ${name}: these tests skipped, this phase must run them (log: ${log}): $(echo ${skipped})"
  log "e2e ${name}: tests passed in $(($(date +%s) - start)) s"
  "${REPO_ROOT}/hack/make-rules/local-down.sh"
}

# Phase 1 skips the gate-off tests (not even started: on a line without
# KEP-3280 they would find its gate off, and run against the wrong cluster)
# and those that need real kubelets (kind).
e2e::phase "gate on" "${GATES_ON}" "${RUNTIME_CONFIG_ON}" "${E2E_RUN}" "GateOff\$|^TestKind${LINE_SKIPS}" 'GateOff$'

if [[ "${E2E_GATE_OFF}" != "0" ]]; then
  e2e::phase "gate off" "${GATES_OFF}" "${RUNTIME_CONFIG_OFF}" 'GateOff$' "^\$${LINE_SKIPS}"
fi
log "e2e passed on release line ${line}"
