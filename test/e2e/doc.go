// Package e2e holds the end-to-end suite: Go tests with client-go against a
// local cluster of the patched control plane with KWOK nodes (`make e2e`).
package e2e
