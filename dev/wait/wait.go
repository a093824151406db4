// Package wait is how tests wait for a state that another goroutine, process or node
// reaches in its own time: poll a condition until it holds, and fail naming what never
// came once a generous timeout has passed. A test asserts the order of things and the
// state they end in; it never sleeps a fixed time hoping the state is there by then, so
// it passes on a loaded machine as on an idle one.
//
// The polls back off: the second comes 5 ms after the first, and each pause is half as
// long again as the one before, up to 200 ms. A state that comes soon is seen soon, and a
// long wait settles at five asks a second, which matters when the condition is a request
// to an API with a per-credential rate limit.
package wait

import (
	"testing"
	"time"
)

const (
	first = 5 * time.Millisecond   // the pause before the second ask
	most  = 200 * time.Millisecond // the longest pause between two asks
)

// For polls cond until it holds; after timeout it fails the test, saying what it waited
// for. The condition is asked once more at the deadline, so a state reached during the
// last pause still counts.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := first; !cond(); pause = min(pause*3/2, most) {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("waited %v for %s", timeout, what)
		}
		time.Sleep(min(pause, left))
	}
}
