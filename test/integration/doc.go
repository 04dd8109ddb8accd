// Package integration holds this project's own integration tests: they start
// the etcd and the patched control-plane binaries that `make build` leaves in
// _output/bin as real processes on 127.0.0.1 and talk to them with client-go.
// Upstream-style integration tests of a patch live in the patch series, under
// the tree's test/integration/.
package integration
