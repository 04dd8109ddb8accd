#!/usr/bin/env bash
# The fork's feature gates in the clusters it brings up (the local cluster,
# hack/lib/local.sh; the kind cluster, hack/lib/kind.sh). Sourced after init.sh.

# The gates on by default.
# shellcheck disable=SC2034
GATES_DEFAULT="DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true"

# gates::runtime_config GATES: the kube-apiserver --runtime-config that GATES
# need: lifecycle.k8s.io/v1alpha1 with EvictionRequestAPI=true (KEP-4563's
# API group is off by default, and the gate alone serves nothing); empty
# otherwise.
gates::runtime_config() {
  [[ ",$1," != *,EvictionRequestAPI=true,* ]] || echo "lifecycle.k8s.io/v1alpha1=true"
}
