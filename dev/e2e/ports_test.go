package e2e

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/devstack"
)

// A bundle started beside another is told every port in use at once, each with its flag,
// before anything starts (and nothing is left running or written).
func TestABundleNamesEveryBusyPortBeforeStarting(t *testing.T) {
	api, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	frontend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer frontend.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := devstack.Start(ctx, devstack.Options{DataDir: t.TempDir(), HTTPAddr: api.Addr().String(),
		TemporalPort: frontend.Addr().(*net.TCPAddr).Port, UIPort: -1, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err == nil {
		_ = b.Shutdown()
		t.Fatal("a bundle started on ports in use")
	}
	for _, want := range []string{api.Addr().String() + " (--http-addr)", frontend.Addr().String() + " (--temporal-port)"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the refusal %q does not name %s", err, want)
		}
	}
}
