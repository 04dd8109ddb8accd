package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCountRequestsReadsRotatedAuditLogs: kube-apiserver rotates its audit log
// every 100 MB into audit-<time>.log beside it; the requests of the phases
// before the last rotation are counted too, oldest file first. Before, only
// audit.log was read, and line 1.38's first run, whose log rotated, counted none of its
// first phase.
func TestCountRequestsReadsRotatedAuditLogs(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	event := func(at time.Time, verb, resource, ns string) string {
		return `{"stage":"ResponseComplete","verb":"` + verb + `","userAgent":"kube-controller-manager/v0.0.0-test (linux/amd64) kubernetes/abc/evictionrequest-controller","requestReceivedTimestamp":"` +
			at.Format(time.RFC3339Nano) + `","objectRef":{"resource":"` + resource + `","namespace":"` + ns + `"}}` + "\n"
	}
	write := func(name string, lines ...string) {
		t.Helper()
		var data []byte
		for _, l := range lines {
			data = append(data, l...)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The happy phase went to the first backup, the blocked phase's start
	// to the second, its end to the current file.
	write("audit-2026-12-07T14-10-00.000.log", event(t0.Add(time.Minute), "create", "evictions", "happy"), event(t0.Add(2*time.Minute), "patch", "evictions", "happy"))
	write("audit-2026-12-07T14-30-00.000.log", event(t0.Add(20*time.Minute), "create", "evictions", "blocked"))
	write("audit.log", event(t0.Add(50*time.Minute), "create", "evictions", "blocked"))
	// Another file in the folder is not the audit log's.
	write("other.log", event(t0.Add(time.Minute), "create", "evictions", "happy"))

	res := &Results{HappyPods: 2, BlockedPods: 1}
	if err := countRequests(filepath.Join(dir, "audit.log"), res, "happy", "blocked", t0, t0.Add(10*time.Minute), t0.Add(60*time.Minute), 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	if res.AuditLogFiles != 3 {
		t.Errorf("read %d files, want 3", res.AuditLogFiles)
	}
	if res.HappyRequestsAll != 2 || res.HappyRequestsPerPod != 1 {
		t.Errorf("happy phase: %d requests, %.2f per pod; want 2, 1.00", res.HappyRequestsAll, res.HappyRequestsPerPod)
	}
	total := 0
	for _, c := range res.BlockedRequestsAll {
		total += c.Total
	}
	if total != 2 {
		t.Errorf("blocked phase: %d requests, want 2 (one in each of the last two files)", total)
	}
	window := 0
	for _, c := range res.BlockedRequests {
		window += c.Total
	}
	if window != 1 {
		t.Errorf("blocked phase's last 20 minutes: %d requests, want 1", window)
	}
}
