package orders

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/opentreasury/treasury/internal/events"
)

// transitions are the status changes the step table allows, from → to.
func transitions() map[[2]Status]bool {
	out := map[[2]Status]bool{}
	for _, s := range Steps {
		for _, from := range s.From {
			if s.To != "" && s.To != from {
				out[[2]Status{from, s.To}] = true
			}
		}
	}
	return out
}

// reachable is every status an order can be in, following the table from a new order.
func reachable() map[Status]bool {
	seen := map[Status]bool{StepCreated.To: true}
	for changed := true; changed; {
		changed = false
		for edge := range transitions() {
			if seen[edge[0]] && !seen[edge[1]] {
				seen[edge[1]], changed = true, true
			}
		}
	}
	return seen
}

// TestSteps holds the step table to itself: each step starts only from statuses an order
// can reach from draft, none from a terminal one, names known statuses and a known event,
// and has a key of its own.
func TestSteps(t *testing.T) {
	if StepCreated.From != nil || StepCreated.To != StatusDraft || StepCreated.Event != events.OrderCreated {
		t.Fatalf("StepCreated is %+v, want a new order made a draft with Order.Created", StepCreated)
	}
	reach, keys := reachable(), map[string]string{}
	for _, s := range Steps {
		t.Run(s.Key(0), func(t *testing.T) {
			if prev, dup := keys[s.Key(0)]; dup {
				t.Errorf("key %q is %s's too", s.Key(0), prev)
			}
			keys[s.Key(0)] = s.Name
			if len(s.From) == 0 && s.Name != StepCreated.Name {
				t.Error("starts from any status: only StepCreated has no status to start from")
			}
			for _, from := range s.From {
				switch {
				case !slices.Contains(Statuses, from):
					t.Errorf("starts from %q, not a status", from)
				case from.Terminal():
					t.Errorf("starts from %s, a terminal status", from)
				case !reach[from]:
					t.Errorf("starts from %s, which no order reaches from draft", from)
				}
			}
			if s.To != "" && !slices.Contains(Statuses, s.To) {
				t.Errorf("leaves the order %q, not a status", s.To)
			}
			if name, ok := events.Canonical(s.Event); s.Event != "" && (!ok || name != s.Event) {
				t.Errorf("emits %q, not an event name of package events", s.Event)
			}
		})
	}
}

// TestTerminalStatuses: each terminal status is reached only by steps that emit its
// event, so a subscriber always hears how an order ended; every other status has a step
// out of it, and every status is reachable.
func TestTerminalStatuses(t *testing.T) {
	ending := map[Status]string{StatusConfirmed: events.OrderConfirmed, StatusFailed: events.OrderFailed,
		StatusRejected: events.OrderRejected}
	reach, edges := reachable(), transitions()
	for _, status := range Statuses {
		t.Run(string(status), func(t *testing.T) {
			if !reach[status] {
				t.Error("no order reaches it from draft")
			}
			event, terminal := ending[status]
			if status.Terminal() != terminal {
				t.Fatalf("Terminal() is %v", status.Terminal())
			}
			leaves := false
			for edge := range edges {
				leaves = leaves || edge[0] == status
			}
			if terminal && leaves {
				t.Error("terminal, yet a step leaves it")
			} else if !terminal && !leaves {
				t.Error("no step leaves it, yet it is not terminal")
			}
			for _, s := range Steps {
				if terminal && s.To == status && s.Event != event {
					t.Errorf("step %s ends the order %s with %q, want %s", s.Name, status, s.Event, event)
				}
			}
		})
	}
}

// TestEventsDocTransitions: every transition docs/events.md draws in its status machine
// is one the step table allows, and the machine starts at draft and ends at the terminal
// statuses.
func TestEventsDocTransitions(t *testing.T) {
	doc, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	edges := regexp.MustCompile(`(?m)^    (\S+) --> (\S+)$`).FindAllStringSubmatch(string(doc), -1)
	if len(edges) == 0 {
		t.Fatal("docs/events.md draws no status machine")
	}
	allowed := transitions()
	for _, e := range edges {
		from, to := Status(e[1]), Status(e[2])
		switch {
		case from == "[*]":
			if to != StepCreated.To {
				t.Errorf("docs/events.md starts an order at %s, not %s", to, StepCreated.To)
			}
		case to == "[*]":
			if !from.Terminal() {
				t.Errorf("docs/events.md ends an order at %s, not a terminal status", from)
			}
		case !allowed[[2]Status{from, to}]:
			t.Errorf("docs/events.md draws %s --> %s, which no step takes", from, to)
		}
	}
}
