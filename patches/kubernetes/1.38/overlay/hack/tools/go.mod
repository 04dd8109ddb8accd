// Stand-in for upstream's hack/tools module, which is a module of its own and
// so is not in the k8s.io/kubernetes module zip. It holds only the tools that
// the generators run by hack/make-rules/codegen.sh install from here:
//   goimports           hack/update-codegen.sh
//   protoc-gen-go       hack/lib/protoc.sh (kube::protoc::generate_proto)
//   protoc-gen-go-grpc  hack/lib/protoc.sh (kube::protoc::generate_proto)
// Versions: golang.org/x/tools as k8s.io/kubernetes' go.mod pins it; protoc-gen-go
// and protoc-gen-go-grpc as the "versions:" headers of the committed *.pb.go
// files name them (line 1.38: v1.36.12, v1.6.2), since those headers are regenerated.
// Bump with: go get -tool MODULE@VERSION && go mod tidy, then refresh go.work.sum
// with go mod download (go.work keeps go out of the kubernetes workspace).
module k8s.io/kubernetes/hack/tools

go 1.26.0

tool (
	golang.org/x/tools/cmd/goimports
	google.golang.org/grpc/cmd/protoc-gen-go-grpc
	google.golang.org/protobuf/cmd/protoc-gen-go
)

require (
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/telemetry v0.0.0-20260924152758-ed294f943157 // indirect
	golang.org/x/tools v0.51.0 // indirect
	google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.2 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
