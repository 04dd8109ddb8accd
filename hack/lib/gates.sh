#!/usr/bin/env bash
# The fork's feature gates in the clusters it brings up (the local cluster,
# hack/lib/local.sh; the kind cluster, hack/lib/kind.sh). Sourced after init.sh.

# The gates the clusters turn on: the KEPs the selected release line carries
# (CLUSTER_GATES in patches/kubernetes/<line>/line.env), and nothing else.
# With EVICTION_FAST_PATH=1, also the line's CLUSTER_GATES_FAST_PATH: the
# eviction's budget reads from, and status writes to, storage (opt-in
# proposals; the writes leave admission, audit and managedFields of
# poddisruptionbudgets/status out of the eviction's decrement); a line
# without them refuses the knob. LOCAL_FEATURE_GATES and KIND_FEATURE_GATES
# override both.
# shellcheck disable=SC2034
GATES_KEPS="$(component::setting kubernetes CLUSTER_GATES)"
GATES_EVICTION_FAST_PATH="$(component::setting kubernetes CLUSTER_GATES_FAST_PATH)"
[[ -n "${GATES_KEPS}" ]] ||
  fatal "release line $(line::selected) sets no CLUSTER_GATES in patches/kubernetes/$(line::selected)/line.env: the gates its clusters turn on"
case "${EVICTION_FAST_PATH:-0}" in
0) GATES_DEFAULT="${GATES_KEPS}" ;;
1)
  [[ -n "${GATES_EVICTION_FAST_PATH}" ]] ||
    fatal "EVICTION_FAST_PATH=1: release line $(line::selected) carries no eviction fast path (CLUSTER_GATES_FAST_PATH in patches/kubernetes/$(line::selected)/line.env is empty)"
  GATES_DEFAULT="${GATES_KEPS},${GATES_EVICTION_FAST_PATH}"
  ;;
*) fatal "EVICTION_FAST_PATH=${EVICTION_FAST_PATH} is neither 0 nor 1" ;;
esac

# gates::runtime_config GATES: the kube-apiserver --runtime-config that GATES
# need: lifecycle.k8s.io/v1alpha1 when they turn EvictionRequestAPI on
# (KEP-4563's API group is off by default, and the gate alone serves
# nothing); empty otherwise. GATES is read as the components read
# --feature-gates: comma-separated NAME=VALUE, spaces around either ignored,
# VALUE any spelling of a Go boolean; AllAlpha=true turns on the alpha gate
# unless the gate itself is given.
gates::is_on() {
  local gates="$1" want="$2" entry name value own="" all_alpha="" entries
  IFS=',' read -ra entries <<<"${gates}"
  for entry in "${entries[@]}"; do
    name="${entry%%=*}" value="${entry#*=}"
    name="${name//[[:space:]]/}" value="${value//[[:space:]]/}"
    case "${value}" in
    1 | t | T | true | TRUE | True) value=true ;;
    0 | f | F | false | FALSE | False) value=false ;;
    *) continue ;;
    esac
    [[ "${name}" == "${want}" ]] && own="${value}"
    [[ "${name}" == AllAlpha ]] && all_alpha="${value}"
  done
  [[ "${own:-${all_alpha}}" == true ]]
}

gates::runtime_config() {
  if gates::is_on "$1" EvictionRequestAPI; then
    echo "lifecycle.k8s.io/v1alpha1=true"
  fi
}
