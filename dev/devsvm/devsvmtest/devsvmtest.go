// Package devsvmtest starts a dev Solana chain (devsvm) for a test.
package devsvmtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/devsvm"
)

// Start runs a node in a temporary directory for a test, stopped when it ends, with a slot
// every slot; a machine without Node skips the test. It returns the node and its chain's
// description.
func Start(t testing.TB, slot time.Duration) (*devsvm.Node, devsvm.Info) {
	t.Helper()
	ctx := context.Background()
	n, err := devsvm.Start(ctx, devsvm.Options{Dir: t.TempDir(), SlotTime: slot})
	if errors.Is(err, devsvm.ErrNoNode) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	info, err := n.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n, info
}
