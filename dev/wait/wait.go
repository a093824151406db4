// Package wait is how tests wait for a state that another goroutine, process or node
// reaches in its own time: poll a condition until it holds, and fail naming what never
// came once a generous timeout has passed. A test asserts the order of things and the
// state they end in; it never sleeps a fixed time hoping the state is there by then, so
// it passes on a loaded machine as on an idle one.
package wait

import (
	"testing"
	"time"
)

// Every is how often For asks again.
const Every = 10 * time.Millisecond

// For polls cond until it holds; after timeout it fails the test, saying what it waited
// for.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(Every) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
	}
}
