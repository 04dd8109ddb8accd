#!/usr/bin/env bash
# `make bench-evictionrequest`: the scale benchmark of the EvictionRequest
# controllers (KEP-4563) on a local cluster of its own, with KWOK nodes and
# kube-apiserver's audit log (hack/evictionrequest-scale says what it
# measures and which guarantees fail it):
#
#   1. BENCH_ER_HAPPY pods evicted at once, no budget: requests per evicted pod;
#   2. BENCH_ER_BLOCKED pods behind a budget that allows nothing, watched for
#      BENCH_ER_BLOCKED_FOR: nothing ends, nobody is interrupted, every report
#      within the 20-minute deadline; requests per blocked Eviction per hour
#      over the last BENCH_ER_WINDOW;
#   3. BENCH_ER_DELETIONS of those pods deleted at once: no Interrupted.
#
# kube-controller-manager runs with its default client rate limits. Writes
# ${BENCH_OUT}/evictionrequest-scale.md and .json. The cluster is brought
# down at the end (BENCH_ER_KEEP=1 keeps it, with its logs).
#
# Knobs: BENCH_ER_HAPPY=200 BENCH_ER_BLOCKED=5000 BENCH_ER_DELETIONS=200
# BENCH_ER_BLOCKED_FOR=35m BENCH_ER_WINDOW=10m BENCH_OUT=benchmarks (another
# line than the default: benchmarks/line-<line>); LOCAL_NODES
# (hack/lib/local.sh) spreads the pods, each node's capacity made to fit them.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/local.sh"

BENCH_ER_HAPPY="${BENCH_ER_HAPPY:-200}"
BENCH_ER_BLOCKED="${BENCH_ER_BLOCKED:-5000}"
BENCH_ER_DELETIONS="${BENCH_ER_DELETIONS:-200}"
BENCH_ER_BLOCKED_FOR="${BENCH_ER_BLOCKED_FOR:-35m}"
BENCH_ER_WINDOW="${BENCH_ER_WINDOW:-10m}"
BENCH_ER_KEEP="${BENCH_ER_KEEP:-0}"
# Another line's figures go beside the default line's, not over them.
bench_line_dir=""
[[ "$(line::selected)" == "$(line::default)" ]] || bench_line_dir="/line-$(line::selected)"
BENCH_OUT="${BENCH_OUT:-${REPO_ROOT}/benchmarks${bench_line_dir}}"
for var in BENCH_ER_HAPPY BENCH_ER_BLOCKED BENCH_ER_DELETIONS; do
  [[ "${!var}" =~ ^[1-9][0-9]*$ ]] || fatal "${var} must be a positive number, not '${!var}'"
done
[[ ",${LOCAL_FEATURE_GATES}," == *,EvictionRequestAPI=true,* ]] ||
  fatal "LOCAL_FEATURE_GATES must turn EvictionRequestAPI on (it is '${LOCAL_FEATURE_GATES}')"

running="$(local::running_pids)"
[[ -z "${running}" ]] || fatal "a local cluster is running; the benchmark needs one of its own: stop it with 'make local-down'"

# Room for every pod of the benchmark on the nodes, and a few more.
export LOCAL_NODE_PODS=$(((BENCH_ER_HAPPY + BENCH_ER_BLOCKED) / LOCAL_NODES + 20))
export LOCAL_AUDIT_POLICY="${REPO_ROOT}/build/local/audit-policy.yaml"

bin="${OUTPUT_DIR}/bench/bin/evictionrequest-scale"
mkdir -p "$(dirname "${bin}")" "${BENCH_OUT}"
(cd "${REPO_ROOT}" && go build -o "${bin}" ./hack/evictionrequest-scale) || fatal "building hack/evictionrequest-scale failed"

"${REPO_ROOT}/hack/make-rules/local-up.sh"
if [[ "${BENCH_ER_KEEP}" != 1 ]]; then
  trap '"${REPO_ROOT}/hack/make-rules/local-down.sh"' EXIT
fi

log "benchmark: ${BENCH_ER_HAPPY} evictions at once, ${BENCH_ER_BLOCKED} blocked for ${BENCH_ER_BLOCKED_FOR}, then ${BENCH_ER_DELETIONS} deletions"
"${bin}" -kubeconfig "${LOCAL_KUBECONFIG}" -audit-log "${LOCAL_LOGS_DIR}/audit.log" \
  -out "${BENCH_OUT}/evictionrequest-scale" \
  -command "make bench-evictionrequest${bench_line_dir:+ LINE=$(line::selected)}$(for var in BENCH_ER_HAPPY BENCH_ER_BLOCKED BENCH_ER_DELETIONS BENCH_ER_BLOCKED_FOR BENCH_ER_WINDOW; do
    case "${var}:${!var}" in
    BENCH_ER_HAPPY:200 | BENCH_ER_BLOCKED:5000 | BENCH_ER_DELETIONS:200 | BENCH_ER_BLOCKED_FOR:35m | BENCH_ER_WINDOW:10m) ;;
    *) printf ' %s=%s' "${var}" "${!var}" ;;
    esac
  done)" \
  -happy "${BENCH_ER_HAPPY}" -blocked "${BENCH_ER_BLOCKED}" -deletions "${BENCH_ER_DELETIONS}" \
  -blocked-for "${BENCH_ER_BLOCKED_FOR}" -window "${BENCH_ER_WINDOW}"
log "wrote ${BENCH_OUT#"${REPO_ROOT}/"}/evictionrequest-scale.md"
