package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// testProfile is a CPU profile of 100 ms: 30 ms in a scheduling cycle, 20 ms
// in the kube-apiserver called by the scheduler's client (both the
// scheduler's: its code is on the stack), 10 ms in a framework plugin of
// the staging module, 40 ms in the kube-apiserver serving another client.
func testProfile() *profile.Profile {
	var fns []*profile.Function
	fn := func(name string) *profile.Location {
		f := &profile.Function{ID: uint64(len(fns) + 1), Name: name}
		fns = append(fns, f)
		return &profile.Location{ID: f.ID, Line: []profile.Line{{Function: f}}}
	}
	cycle := fn("k8s.io/kubernetes/pkg/scheduler.(*Scheduler).scheduleOne")
	serve := fn("k8s.io/apiserver/pkg/endpoints/handlers.CreateResource.func1")
	restCall := fn("k8s.io/client-go/rest.(*Request).Do")
	preempt := fn("k8s.io/kubernetes/pkg/scheduler/framework/preemption.(*Evaluator).prepareCandidate")
	plugin := fn("k8s.io/kube-scheduler/framework.(*CycleState).Read")
	harness := fn("k8s.io/kubernetes/test/integration/scheduler_perf.createPods")
	ms := func(n int64) []int64 { return []int64{n, n * int64(time.Millisecond)} }
	return &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     int64(10 * time.Millisecond),
		Sample: []*profile.Sample{
			{Location: []*profile.Location{cycle}, Value: ms(30)},
			{Location: []*profile.Location{serve, restCall, preempt}, Value: ms(20)},
			{Location: []*profile.Location{plugin}, Value: ms(10)},
			{Location: []*profile.Location{serve, restCall, harness}, Value: ms(40)},
		},
		Location: []*profile.Location{cycle, serve, restCall, preempt, plugin, harness},
		Function: fns,
	}
}

// writeTestProfile writes testProfile and returns its path.
func writeTestProfile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.prof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := testProfile().Write(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAttributeCPU(t *testing.T) {
	got, err := attributeCPU(writeTestProfile(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuAttribution{Scheduler: 60 * time.Millisecond, Total: 100 * time.Millisecond}); got != want {
		t.Errorf("attributeCPU = %+v, want %+v", got, want)
	}
}

func TestAttributeCPURefusesAProfileWithoutCPU(t *testing.T) {
	p := testProfile()
	p.SampleType = []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}, {Type: "alloc_objects", Unit: "count"}}
	path := filepath.Join(t.TempDir(), "heap.prof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if _, err := attributeCPU(path); err == nil {
		t.Error("a profile without CPU samples was attributed")
	}
}
