#!/usr/bin/env bash
# make kind-e2e: the end-to-end tests on the kind cluster of real kubelets
# (`make kind-up`; brought up here when none runs, and deleted at the end
# when this script made it, unless KIND_KEEP=1):
#   1. this repository's suite (test/e2e) on the kind workers: what KWOK
#      cannot do (KEP-3017 with real readiness probes, KEP-3280, KEP-3838 and
#      async preemption of real pods, the kubelets' gates, the EvictionRequest
#      controllers under kubeadm's controller roles, and the descheduler's
#      evacuation mode on EvictionRequests); the descheduler's webhook tests
#      are not in the default KIND_E2E_RUN (the kube-apiserver in kind cannot
#      call a webhook served on the host's 127.0.0.1);
#   2. upstream's own e2e.test, built from the patched tree, focused on
#      KIND_E2E_UPSTREAM_FOCUS (SchedulerPreemption, DisruptionController,
#      PriorityClass); every spec and its result go to
#      _output/kind-e2e/upstream/results.txt (KIND_E2E_UPSTREAM=0 skips it).
#
# LINE=<line> runs both on that release line's cluster (make kind-up
# LINE=<line>) with its e2e.test; what the line does not carry skips (the
# descheduler's tests on a line without a descheduler, KEP-4563's without
# its gate).
# Knobs: KIND_E2E_RUN (go test -run of phase 1), KIND_E2E_TIMEOUT (30m),
# KIND_E2E_UPSTREAM_FOCUS, KIND_E2E_UPSTREAM_SKIP, plus hack/lib/kind.sh's.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"
source "${REPO_ROOT}/hack/lib/version.sh"
source "${REPO_ROOT}/hack/lib/docker.sh"
source "${REPO_ROOT}/hack/lib/kind.sh"

KIND_E2E_RUN="${KIND_E2E_RUN:-Kind|KEP3017|KEP3280|KEP3838|KEP4832|KEP4563|DeschedulerEvacuationMode}"
KIND_E2E_TIMEOUT="${KIND_E2E_TIMEOUT:-30m}"
KIND_E2E_UPSTREAM="${KIND_E2E_UPSTREAM:-1}"
KIND_E2E_UPSTREAM_FOCUS="${KIND_E2E_UPSTREAM_FOCUS:-\[sig-scheduling\] SchedulerPreemption|\[sig-apps\] DisruptionController|PriorityClass}"
KIND_E2E_UPSTREAM_SKIP="${KIND_E2E_UPSTREAM_SKIP:-\[Flaky\]|\[Disruptive\]}"

docker::ensure
if ! kind::exists; then
  "${REPO_ROOT}/hack/make-rules/kind-up.sh"
  # The cluster this script made goes at the end; the verdict is the tests'.
  [[ "${KIND_KEEP:-0}" == "1" ]] || trap kind::teardown EXIT
fi
[[ -s "${KIND_KUBECONFIG}" ]] || kind::kind export kubeconfig --name "${KIND_NAME}" --kubeconfig "${KIND_KUBECONFIG}"

# What the nodes hold (the node image's preloaded images), and the
# scheduler's secure port on the control-plane node (kind-up.sh binds it).
node_images="$(docker exec "${KIND_NAME}-worker" ctr --namespace k8s.io images list --quiet)" ||
  fatal "cannot list the images of ${KIND_NAME}-worker"
node_image() {
  grep -m 1 "^$1" <<<"${node_images}" || fatal "no image $1* on ${KIND_NAME}-worker: is it a cluster of make kind-up?"
}
pause_image="$(node_image registry.k8s.io/pause:)"
agnhost_image="$(node_image registry.k8s.io/e2e-test-images/agnhost:)"
cp_ip="$(docker inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${KIND_NAME}-control-plane")"

# The descheduler runs on the host against the kind cluster; without a built
# binary its tests skip and say so.
descheduler_bin=""
if component::has_line descheduler "$(line::selected)" && [[ -x "$(line::bin)/descheduler" ]]; then
  descheduler_bin="$(line::bin)/descheduler"
fi

# What TestKindNodesRunTheFork expects of the nodes: the line's kubelet (its
# own version, which is another line's where the line borrows it,
# BORROWED_BINARIES) and the gates the cluster turns on.
kubelet_version="$("$(line::bin)/kubelet" --version | awk '{print $2}')"

log "kind e2e 1/2: test/e2e -run '${KIND_E2E_RUN}' (pods: ${pause_image}, ${agnhost_image})"
start="$(date +%s)"
(
  cd "${REPO_ROOT}"
  KUBE_GUARD_E2E_KUBECONFIG="${KIND_KUBECONFIG}" \
    KUBE_GUARD_E2E_NODE_SELECTOR=type=kind \
    KUBE_GUARD_E2E_POD_IMAGE="${pause_image}" \
    KUBE_GUARD_E2E_AGNHOST_IMAGE="${agnhost_image}" \
    KUBE_GUARD_E2E_SCHEDULER_URL="https://${cp_ip}:10259" \
    KUBE_GUARD_E2E_DESCHEDULER="${descheduler_bin}" \
    KUBE_GUARD_E2E_KUBELET_VERSION="${kubelet_version}" \
    KUBE_GUARD_E2E_GATES="${KIND_FEATURE_GATES}" \
    go test ./test/e2e/... -count=1 -v -timeout "${KIND_E2E_TIMEOUT}" -run "${KIND_E2E_RUN}"
) || fatal "kind e2e: test/e2e failed (kind export logs --name ${KIND_NAME} collects the nodes' logs)"
log "kind e2e 1/2: passed in $(($(date +%s) - start)) s"

if [[ "${KIND_E2E_UPSTREAM}" == "0" ]]; then
  log "KIND_E2E_UPSTREAM=0: upstream's e2e.test skipped"
  exit 0
fi
"${REPO_ROOT}/hack/make-rules/build-e2e-test.sh"
# Outside _output/kind, which make kind-down deletes.
report="${OUTPUT_DIR}/kind-e2e/upstream"
rm -rf "${report}"
mkdir -p "${report}"
log "kind e2e 2/2: upstream's e2e.test --ginkgo.focus='${KIND_E2E_UPSTREAM_FOCUS}' --ginkgo.skip='${KIND_E2E_UPSTREAM_SKIP}' (log: ${report#"${REPO_ROOT}/"}/e2e.log)"
start="$(date +%s)"
status=0
"$(line::bin)/e2e.test" --kubeconfig="${KIND_KUBECONFIG}" --provider=skeleton \
  --ginkgo.focus="${KIND_E2E_UPSTREAM_FOCUS}" --ginkgo.skip="${KIND_E2E_UPSTREAM_SKIP}" \
  --ginkgo.timeout=2h --ginkgo.no-color --ginkgo.json-report="${report}/report.json" --report-dir="${report}" \
  --dump-logs-on-failure=false >"${report}/e2e.log" 2>&1 || status=$?
# Every spec that ran, and its result, one a line.
jq -r '.[].SpecReports[] | select(.LeafNodeType == "It") | select(.State != "skipped") |
  "\(.State)\t\((.ContainerHierarchyTexts + [.LeafNodeText]) | join(" "))"' "${report}/report.json" |
  LC_ALL=C sort -k2 >"${report}/results.txt"
log "kind e2e 2/2: $(cut -f1 "${report}/results.txt" | sort | uniq -c | xargs) in $(($(date +%s) - start)) s (${report#"${REPO_ROOT}/"}/results.txt)"
cat "${report}/results.txt"
[[ "${status}" == "0" ]] || fatal "upstream's e2e.test failed (${report#"${REPO_ROOT}/"}/e2e.log; docs/kind.md explains the known failures)"
