package assemble

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// recorded is a component that writes its starts and stops into a shared log.
func recorded(name string, log *[]string, failStart bool) Component {
	return Component{Name: name,
		Start: func(context.Context) error {
			*log = append(*log, "start "+name)
			if failStart {
				return errors.New("refused")
			}
			return nil
		},
		Stop: func(context.Context) error { *log = append(*log, "stop "+name); return nil },
	}
}

func TestGroupStopsInTheReverseOfTheStartOrder(t *testing.T) {
	var log []string
	g := &Group{}
	if err := g.Start(context.Background(), recorded("a", &log, false), recorded("b", &log, false), recorded("c", &log, false)); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(); err != nil { // a second stop stops nothing twice
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("got %v, want %v", log, want)
	}
}

func TestGroupUndoesAFailedStart(t *testing.T) {
	var log []string
	g := &Group{}
	err := g.Start(context.Background(), recorded("a", &log, false), recorded("b", &log, true), recorded("c", &log, false))
	if err == nil || !strings.Contains(err.Error(), "start b") {
		t.Fatalf("error %v should name the component that failed", err)
	}
	want := []string{"start a", "start b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("got %v, want %v", log, want)
	}
}

func TestGroupRunEndsOnAFailure(t *testing.T) {
	g := &Group{}
	boom := errors.New("the server stopped serving")
	stopped := false
	errc := make(chan error, 1)
	go func() {
		errc <- g.Run(context.Background(), Component{Name: "server",
			Start: func(context.Context) error { go g.Fail(boom); return nil },
			Stop:  func(context.Context) error { stopped = true; return nil }})
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, boom) || !stopped {
			t.Fatalf("Run returned %v, stopped %v", err, stopped)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after a component failed")
	}
}

// The processes' lists state their shutdown order: these are the orders the rest of the
// system relies on.
func TestProcessesStopInTheirStatedOrder(t *testing.T) {
	stopOrder := func(parts []Component) []string {
		var names []string
		for i := len(parts) - 1; i >= 0; i-- {
			names = append(names, parts[i].Name)
		}
		return names
	}
	before := func(t *testing.T, order []string, first, then string) {
		t.Helper()
		i, j := slices.Index(order, first), slices.Index(order, then)
		if i < 0 || j < 0 || i > j {
			t.Errorf("stop order %v: %q must stop before %q", order, first, then)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := NewProcess(Config{}, "test", nil)

	api := stopOrder(APIComponents(p, ln))
	// http.Server.Shutdown does not wait for hijacked connections: they close first.
	before(t, api, "live connections", "http server")
	// Drained requests still write their request logs, and the hub outlives its requests.
	before(t, api, "http server", "live channel")
	before(t, api, "live channel", "store")
	before(t, api, "temporal client", "store")

	worker := stopOrder(WorkerComponents(p))
	// Running activities finish on an open store.
	before(t, worker, "worker", "store")
	before(t, worker, "worker", "temporal client")
	before(t, worker, "webhook dispatcher", "event follower")
	before(t, worker, "event follower", "store")
}
