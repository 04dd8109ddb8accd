# kube-guard: patched Kubernetes control plane, built from a pinned upstream
# release plus the patch series in patches/. Every target is one line calling
# a script under hack/make-rules/; `make help` lists them.

SHELL := /usr/bin/env bash
.DEFAULT_GOAL := build
COMPONENT ?= kubernetes
# LINE=<major>.<minor> picks the release line every target works on (a folder
# patches/<c>/<line>/ with its pin and topics); unset: the newest. It reaches
# the scripts through the environment (hack/lib/init.sh, line::selected).

##@ Main (LINE=<line> picks a release line, e.g. make build LINE=<line>; default: the newest, README's pins table lists them)

.PHONY: build
build: ## Materialise upstream, apply patches, build every component's binaries, the tools and the pristine ones into _output/bin (an older LINE: _output/bin/<line>/)
	hack/make-rules/build-all.sh

.PHONY: test
test: ## Build, then run this repo's tests and upstream's tests of every package the patches touch
	hack/make-rules/test.sh

.PHONY: verify
verify: ## Every check in hack/make-rules/verify/ (series, export, gofmt, shellcheck, trailers, versions, docs, debian-lock, api-lint, go.mod, codegen); SKIP_VERIFY="codegen" skips one; never changes the checkout
	hack/make-rules/verify/all.sh

.PHONY: update
update: ## Rewrite every derived file from its source (hack/make-rules/update/: go.mod and staging-overrides/, overlays, README's pins)
	hack/make-rules/update/all.sh

.PHONY: update-codegen-verified
update-codegen-verified: ## Run the generators of each release line (LINE=<line>: that one) and record the inputs they left unchanged in patches/<c>/<line>/codegen.verified, which make test then trusts instead of regenerating
	hack/make-rules/update/codegen-verified.sh

.PHONY: bench
bench: ## scheduler_perf preemption benchmarks, pristine upstream vs patched gate off/on at the same time (BENCH_ROUNDS=5, BENCH_TOGETHER=1); writes benchmarks/
	hack/make-rules/bench.sh

.PHONY: bench-evictionrequest
bench-evictionrequest: ## EvictionRequest controllers at scale on a local cluster of their own (KWOK, audit log): 200 evictions at once, 5000 blocked for 35 min, 200 deletions; requests per pod and per blocked Eviction-hour; writes benchmarks/evictionrequest-scale.md
	hack/make-rules/bench-evictionrequest.sh

.PHONY: bench-postfilter
bench-postfilter: ## One preemption (DefaultPreemption.PostFilter) with the KEP-3280 gate off vs on, benchstat over BENCH_POSTFILTER_COUNT=10 runs; writes benchmarks/postfilter.md
	hack/make-rules/bench-postfilter.sh

##@ Local cluster (knobs: LOCAL_NODES=4, LOCAL_FEATURE_GATES=DisruptionPolicyInPriorityClass=true,EvictionRequestAPI=true, EVICTION_FAST_PATH=0; see hack/lib/local.sh)

.PHONY: local-up
local-up: ## Start etcd, the patched control plane and LOCAL_NODES KWOK nodes on 127.0.0.1 (kubeconfig: _output/local/kubeconfig)
	hack/make-rules/local-up.sh

.PHONY: local-down
local-down: ## Stop the processes local-up started (pid files) and remove _output/local
	hack/make-rules/local-down.sh

.PHONY: e2e
e2e: ## Bring a local cluster of LINE up, run test/e2e (gates on, then off; what the line lacks skips), bring it down
	hack/make-rules/e2e.sh

##@ Images (build/images/images.yaml; docs/images.md)

.PHONY: images
images: ## Build the images of the patched components without a daemon into _output/images (an older LINE: _output/images-<line>): docker archives, OCI layout, server tarball (SKIP_BUILD=1 keeps the line's binaries)
	hack/make-rules/images.sh

.PHONY: push
push: ## Push the images of _output/images to REGISTRY=HOST[:PORT][/PATH] and compare digests read back
	hack/make-rules/push.sh

##@ kind: real kubelets (docs/kind.md; knobs: KIND_WORKERS=2, KIND_FEATURE_GATES; see hack/lib/kind.sh)

.PHONY: node-image
node-image: ## Build the kind node image kube-guard/node:<fork version> offline and load it into docker (starts an engine if none runs)
	hack/make-rules/node-image.sh

.PHONY: kind-up
kind-up: ## kind cluster on the line's node image: 1 control plane + KIND_WORKERS workers, the line's gates on everywhere (kubeconfig: _output/kind/kubeconfig)
	hack/make-rules/kind-up.sh

.PHONY: kind-down
kind-down: ## Delete the kind cluster of kind-up
	hack/make-rules/kind-down.sh

.PHONY: kind-e2e
kind-e2e: ## test/e2e on the kind cluster (real kubelets), then upstream's e2e.test focused on preemption, disruption and PriorityClass
	hack/make-rules/kind-e2e.sh

.PHONY: kind-upgrade-test
kind-upgrade-test: ## The adoption path on kind: upstream's control plane, replaced in place by the fork's (gates default, then on), back to upstream and forth; no pod restarts (docs/kind.md)
	hack/make-rules/kind-upgrade-test.sh

##@ Patch series and rebases (COMPONENT=kubernetes by default; any folder build/<c>/ with a component.env). A new patch goes into a topic: a 'Topic: <topic>' trailer, the topic listed in patches/<c>/<line>/topics with a TOPIC.md (docs/development.md)

.PHONY: materialize
materialize: ## Rebuild the pristine upstream tree of $(COMPONENT) on LINE under _output/src/$(COMPONENT) (an older line: _output/src/$(COMPONENT)-<line>)
	hack/make-rules/materialize.sh $(COMPONENT)

.PHONY: apply
apply: ## Materialise, then `git am` patches/$(COMPONENT)/<line> onto it
	hack/make-rules/apply.sh $(COMPONENT)

.PHONY: export-patches
export-patches: ## Write the commits of $(COMPONENT)'s tree on LINE back into patches/$(COMPONENT)/<line>/<topic>/, each by its 'Topic:' trailer
	hack/make-rules/export.sh $(COMPONENT)

.PHONY: rebase
rebase: ## Move patches/$(COMPONENT)/<line> onto upstream TO=<version>: conflicts stop with the git am session open, the same command resumes; NEW_LINE=<line> [TOPICS=...] makes a new release line instead (docs/REBASE.md)
	hack/make-rules/rebase.sh $(COMPONENT) $(TO)

.PHONY: rebase-abort
rebase-abort: ## Abandon a rebase of $(COMPONENT) on LINE in progress: the tree goes back to main and the pin
	hack/make-rules/rebase.sh --abort $(COMPONENT)

.PHONY: rebase-report
rebase-report: ## Try every series on each newer upstream release the proxy serves; writes docs/rebase-report.md
	hack/make-rules/rebase-report.sh

.PHONY: topic-test
topic-test: ## One topic (TOPIC=, COMPONENT=kubernetes) with only the topics it depends on, on the pinned base: build, and upstream's tests of the packages it touches
	hack/make-rules/topic-test.sh $(COMPONENT) $(TOPIC)

.PHONY: topic-bisect
topic-bisect: ## Each patch of one topic (TOPIC=, COMPONENT=kubernetes, LINE=) on its own, in order: go vet and go test of the packages it touches
	hack/make-rules/topic-bisect.sh $(COMPONENT) $(TOPIC)

.PHONY: upstream-pr
upstream-pr: ## One topic (TOPIC=, COMPONENT=kubernetes) as an upstream pull request: branch upstream-pr/<topic> on the pristine release, format-patch files and PULL_REQUEST.md under _output/upstream-pr/ (refused unless gofmt, api-lint, codegen pass)
	hack/make-rules/upstream-pr.sh $(COMPONENT) $(TOPIC)

##@ Parts of build and test

.PHONY: binaries
binaries: ## Build only $(COMPONENT)'s binaries (its BINARIES in build/$(COMPONENT)/component.env)
	hack/make-rules/build.sh $(COMPONENT)

.PHONY: pristine
pristine: ## Build each component's PRISTINE_BINARIES (no patches) into _output/bin/pristine, for the downgrade and skew tests
	hack/make-rules/build-pristine.sh

.PHONY: tools
tools: ## Build the pinned tools (etcd, kwok, kwokctl, golangci-lint-kube-api-linter; hack/tools/*) into _output/bin
	hack/make-rules/tools.sh

.PHONY: codegen
codegen: ## Run $(COMPONENT)'s code generators (build/$(COMPONENT)/codegen.sh, upstream's own) offline in its tree
	hack/make-rules/codegen.sh $(COMPONENT) all

.PHONY: test-upstream
test-upstream: ## Upstream unit and integration tests of the packages the patches touch
	hack/make-rules/test-upstream.sh

.PHONY: test-release-modules
test-release-modules: ## The topics in build/*/release-modules, with their dependencies, on the pristine release with its own go.mod: apply, build, tests
	hack/make-rules/test-release-modules.sh

##@ Housekeeping

.PHONY: clean
clean: ## Remove _output/ (refuses while a tree holds unexported work; FORCE=1 overrides)
	hack/make-rules/clean.sh

.PHONY: help
help: ## List the targets
	@awk 'BEGIN { FS = ":.*##"; printf "Usage: make <target>\n" } /^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-26s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
