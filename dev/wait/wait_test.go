package wait

import (
	"sync/atomic"
	"testing"
	"time"
)

// For returns once the condition holds, having asked until then.
func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var asked atomic.Int32
	For(t, 10*time.Second, "the third ask", func() bool { return asked.Add(1) >= 3 })
	if asked.Load() != 3 {
		t.Fatalf("asked %d times, want 3", asked.Load())
	}
}

// recorder is a testing.TB that keeps the failure instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

// For fails, naming what it waited for, when the condition never holds.
func TestForFailsWhenTheConditionNeverHolds(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				panic(p)
			}
		}()
		For(r, 30*time.Millisecond, "nothing", func() bool { return false })
	}()
	if r.failed == "" {
		t.Fatal("For returned though the condition never held")
	}
}
