package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"kube-guard/test/e2e/framework"
)

// TestKEP4832AsyncPreemption: several preemptors at once (asynchronous
// preemption is on by default in 1.37) all get scheduled, every victim
// carries DisruptionTarget PreemptionByScheduler, and the scheduler's
// /metrics counts the preemption goroutines.
func TestKEP4832AsyncPreemption(t *testing.T) {
	c := setup(t)
	ns := c.Namespace(t, "kep4832")
	low := c.PriorityClass(t, "filler", 10, nil)
	high := c.PriorityClass(t, "preemptor", 2000, nil)
	before := preemptionGoroutines(t, c.SchedulerMetrics(t))

	// Two half-node pods per node fill the cluster.
	half := resource.NewMilliQuantity(c.NodeCPU.MilliValue()/2, resource.DecimalSI)
	c.Deployment(t, ns, "filler", int32(2*len(c.Nodes)), framework.PodSpec(low, *half))

	// One preemptor per node, all at once; each needs one victim.
	rec := c.RecordPods(t, ns, "app=filler")
	var preemptors []string
	for i := range c.Nodes {
		name := fmt.Sprintf("preemptor-%d", i)
		c.CreatePod(t, ns, name, map[string]string{"app": "preemptor"}, framework.PodSpec(high, *half))
		preemptors = append(preemptors, name)
	}
	for _, name := range preemptors {
		c.WaitPodRunningReady(t, ns, name)
	}
	c.Poll(t, "the victims to be gone", func(ctx context.Context) (bool, error) {
		return len(rec.DeletedPods()) >= len(preemptors), nil
	})
	victims := rec.DeletedPods()
	t.Logf("%d preemptors scheduled, victims %v", len(preemptors), victims)
	require.Subset(t, rec.PreemptedPods(), victims, "every victim carried DisruptionTarget PreemptionByScheduler")

	var after map[string]float64
	c.Poll(t, "the scheduler's preemption goroutine metrics", func(ctx context.Context) (bool, error) {
		after = preemptionGoroutines(t, c.SchedulerMetrics(t))
		return after["success"] > before["success"], nil
	})
	t.Logf("scheduler_preemption_goroutines_execution_total before %v, after %v", before, after)
	metrics := c.SchedulerMetrics(t)
	require.Regexp(t, `(?m)^scheduler_preemption_goroutines_duration_seconds_count\{result="success"\} [1-9]`, metrics)
	require.Regexp(t, `(?m)^scheduler_preemption_attempts_total [1-9]`, metrics)
	require.Regexp(t, `(?m)^scheduler_preemption_victims_count [1-9]`, metrics)
}

// preemptionGoroutines reads scheduler_preemption_goroutines_execution_total by result.
func preemptionGoroutines(t *testing.T, metrics string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^scheduler_preemption_goroutines_execution_total\{result="([^"]+)"\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(metrics, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		out[m[1]] = v
	}
	return out
}
