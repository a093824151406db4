package assemble

import (
	"cmp"
	"testing"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
)

// The worker's workflow tasks are polled by pollers of their own on each queue: one pool
// for both would poll only the sticky queue while it has a backlog and leave the shared
// queue's tasks waiting. The SDK refuses options that set both a fixed poller count and a
// poller behaviour, so the worker is built from them, with each WORKER_POLLERS accepted.
func TestWorkflowTasksArePolledOnEachQueueByPollersOfTheirOwn(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, pollers := range []int{0, 1, 2, 5} {
		o := workerOptions(Config{WorkerPollers: pollers}, nil)
		if o.MaxConcurrentWorkflowTaskPollers != 0 {
			t.Fatalf("pollers %d: a fixed count of %d mixed workflow pollers", pollers, o.MaxConcurrentWorkflowTaskPollers)
		}
		if o.WorkflowTaskPollerBehavior == nil {
			t.Fatalf("pollers %d: no workflow poller behaviour", pollers)
		}
		if want := cmp.Or(pollers, 2); o.MaxConcurrentActivityTaskPollers != want {
			t.Fatalf("pollers %d: %d activity pollers, want %d", pollers, o.MaxConcurrentActivityTaskPollers, want)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("pollers %d: the SDK refuses the options: %v", pollers, p)
				}
			}()
			_ = sdkworker.New(c, "wiring-test", o)
		}()
	}
}
