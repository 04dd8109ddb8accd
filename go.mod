module kube-guard

go 1.26.0

godebug default=go1.26

require (
	github.com/google/go-containerregistry v0.22.1
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	github.com/stretchr/testify v1.11.1
	go.etcd.io/etcd/client/v3 v3.7.0
	golang.org/x/sys v0.49.0
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
	k8s.io/component-base v0.37.2
	k8s.io/utils v0.0.0-20260626114624-be93311217bd
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/blang/semver/v4 v4.0.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/docker/cli v29.7.2+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.3 // indirect
	github.com/emicklei/go-restful/v3 v3.13.0 // indirect
	github.com/fxamacker/cbor/v2 v2.9.1 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-openapi/jsonpointer v1.0.0 // indirect
	github.com/go-openapi/jsonreference v1.0.0 // indirect
	github.com/go-openapi/swag v0.27.1 // indirect
	github.com/go-openapi/swag/cmdutils v0.27.1 // indirect
	github.com/go-openapi/swag/conv v0.27.1 // indirect
	github.com/go-openapi/swag/fileutils v0.27.1 // indirect
	github.com/go-openapi/swag/jsonutils v0.27.1 // indirect
	github.com/go-openapi/swag/loading v0.27.1 // indirect
	github.com/go-openapi/swag/mangling v0.27.1 // indirect
	github.com/go-openapi/swag/netutils v0.27.1 // indirect
	github.com/go-openapi/swag/pools v0.27.1 // indirect
	github.com/go-openapi/swag/stringutils v0.27.1 // indirect
	github.com/go-openapi/swag/typeutils v0.27.1 // indirect
	github.com/go-openapi/swag/yamlutils v0.27.1 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/gnostic-models v0.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/prometheus/client_golang v1.24.0 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.0 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.etcd.io/etcd/api/v3 v3.7.3 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.7.3 // indirect
	go.opentelemetry.io/otel v1.44.0 // indirect
	go.opentelemetry.io/otel/trace v1.44.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.1 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/term v0.47.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/grpc v1.83.2 // indirect
	gopkg.in/evanphx/json-patch.v4 v4.13.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	gotest.tools/v3 v3.5.2 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/kube-openapi v0.0.0-20260721132016-d427ff9ee9ad // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.4.2 // indirect
)

replace k8s.io/kubernetes => ./staging-overrides/k8s.io/kubernetes

replace k8s.io/api => ./staging-overrides/k8s.io/api

replace k8s.io/apiextensions-apiserver => ./staging-overrides/k8s.io/apiextensions-apiserver

replace k8s.io/apimachinery => ./staging-overrides/k8s.io/apimachinery

replace k8s.io/apiserver => ./staging-overrides/k8s.io/apiserver

replace k8s.io/cli-runtime => ./staging-overrides/k8s.io/cli-runtime

replace k8s.io/client-go => ./staging-overrides/k8s.io/client-go

replace k8s.io/cloud-provider => ./staging-overrides/k8s.io/cloud-provider

replace k8s.io/cluster-bootstrap => ./staging-overrides/k8s.io/cluster-bootstrap

replace k8s.io/code-generator => ./staging-overrides/k8s.io/code-generator

replace k8s.io/component-base => ./staging-overrides/k8s.io/component-base

replace k8s.io/component-helpers => ./staging-overrides/k8s.io/component-helpers

replace k8s.io/controller-manager => ./staging-overrides/k8s.io/controller-manager

replace k8s.io/cri-api => ./staging-overrides/k8s.io/cri-api

replace k8s.io/cri-client => ./staging-overrides/k8s.io/cri-client

replace k8s.io/cri-streaming => ./staging-overrides/k8s.io/cri-streaming

replace k8s.io/csi-translation-lib => ./staging-overrides/k8s.io/csi-translation-lib

replace k8s.io/dynamic-resource-allocation => ./staging-overrides/k8s.io/dynamic-resource-allocation

replace k8s.io/endpointslice => ./staging-overrides/k8s.io/endpointslice

replace k8s.io/externaljwt => ./staging-overrides/k8s.io/externaljwt

replace k8s.io/kms => ./staging-overrides/k8s.io/kms

replace k8s.io/kube-aggregator => ./staging-overrides/k8s.io/kube-aggregator

replace k8s.io/kube-controller-manager => ./staging-overrides/k8s.io/kube-controller-manager

replace k8s.io/kube-proxy => ./staging-overrides/k8s.io/kube-proxy

replace k8s.io/kube-scheduler => ./staging-overrides/k8s.io/kube-scheduler

replace k8s.io/kubectl => ./staging-overrides/k8s.io/kubectl

replace k8s.io/kubelet => ./staging-overrides/k8s.io/kubelet

replace k8s.io/metrics => ./staging-overrides/k8s.io/metrics

replace k8s.io/mount-utils => ./staging-overrides/k8s.io/mount-utils

replace k8s.io/pod-security-admission => ./staging-overrides/k8s.io/pod-security-admission

replace k8s.io/sample-apiserver => ./staging-overrides/k8s.io/sample-apiserver

replace k8s.io/streaming => ./staging-overrides/k8s.io/streaming
