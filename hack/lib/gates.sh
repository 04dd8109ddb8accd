#!/usr/bin/env bash
# The fork's feature gates in the clusters it brings up (the local cluster,
# hack/lib/local.sh; the kind cluster, hack/lib/kind.sh). Sourced after init.sh.

# The gates on by default: KEP-3280's, KEP-4563's, and the eviction's budget
# status write to storage (alpha upstream: it leaves admission and audit of
# poddisruptionbudgets/status out of the eviction's decrement).
# shellcheck disable=SC2034
GATES_DEFAULT="DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true,EvictionWritesBudgetsToStorage=true"

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
