package events

import (
	"errors"
	"strings"
	"testing"
)

// FuzzSubscriptionEntry holds subscription entries to SPEC 3.8: an entry is refused with
// ErrEntry or stored lowercase, in a form that normalises to itself; every canonical name
// and every prefix.* of one, in any case, is accepted; a stored exact entry selects
// exactly the one event it names, in any case; a stored prefix.* entry selects exactly the
// events under that prefix; * selects everything.
func FuzzSubscriptionEntry(f *testing.F) {
	for _, s := range []string{"Order.Submitted", "order.submitted", "ORDER.CONFIRMED", "order.*", "Wallet.*", "*",
		"websocket.test", "webhook.*", "payment.*", "order.submit", "order.", "order*", "*.submitted", "**", "",
		" order.submitted", "order.submitted\n", "webhoo\u212a.test", "order.\u017fubmitted", "ORDER.SUBMİTTED", "order.*.*"} {
		f.Add(s, "Order.Submitted")
	}
	f.Add("*", "anything at all")
	f.Fuzz(func(t *testing.T, entry, name string) {
		for _, n := range Names {
			for _, form := range []string{n, strings.ToLower(n), strings.ToUpper(n)} {
				stored, err := NormalizeEntry(form)
				if err != nil || stored != strings.ToLower(n) || !Matches([]string{stored}, n) {
					t.Fatalf("event name %q: stored %q, %v", form, stored, err)
				}
			}
			prefix, _, _ := strings.Cut(n, ".")
			if stored, err := NormalizeEntry(prefix + ".*"); err != nil || !Matches([]string{stored}, n) {
				t.Fatalf("wildcard %q: stored %q, %v", prefix+".*", stored, err)
			}
		}

		stored, err := NormalizeEntry(entry)
		if err != nil {
			if !errors.Is(err, ErrEntry) || stored != "" {
				t.Fatalf("entry %q refused with %q, %v", entry, stored, err)
			}
			if got, err := NormalizeEntries([]string{entry}); err == nil {
				t.Fatalf("entry %q refused alone but accepted in a list as %v", entry, got)
			}
			return
		}
		if stored != strings.ToLower(stored) || len(stored) > maxEntryLength {
			t.Fatalf("entry %q stored as %q, not lowercase", entry, stored)
		}
		if again, err := NormalizeEntry(stored); err != nil || again != stored {
			t.Fatalf("entry %q stored as %q, which normalises to %q, %v", entry, stored, again, err)
		}
		if list, err := NormalizeEntries([]string{entry, stored, entry}); err != nil || len(list) != 1 || list[0] != stored {
			t.Fatalf("entries %q, %q: %v, %v; want one entry", entry, stored, list, err)
		}
		// What a stored entry selects among the known events.
		prefix, wildcard := strings.CutSuffix(stored, ".*")
		selected := 0
		for _, n := range Names {
			var want bool
			switch {
			case stored == "*":
				want = !IsAppEvent(n)
			case wildcard:
				want = strings.HasPrefix(strings.ToLower(n), prefix+".")
			default:
				want = strings.ToLower(n) == stored
			}
			for _, form := range []string{n, strings.ToLower(n), strings.ToUpper(n)} {
				if got := Matches([]string{stored}, form); got != want {
					t.Fatalf("entry %q (stored %q) selects %q: %v, want %v", entry, stored, form, got, want)
				}
			}
			if want {
				selected++
			}
		}
		if selected == 0 {
			t.Fatalf("entry %q (stored %q) selects no event", entry, stored)
		}
		// And any other name: * takes it unless it is an app's event, an exact entry only its
		// own name.
		got := Matches([]string{stored}, name)
		switch {
		case stored == "*" && got == IsAppEvent(name):
			t.Fatalf("* selects %q: %v", name, got)
		case !wildcard && stored != "*" && got != (strings.ToLower(name) == stored):
			t.Fatalf("entry %q (stored %q) selects %q: %v", entry, stored, name, got)
		case wildcard && got != strings.HasPrefix(strings.ToLower(name), prefix+"."):
			t.Fatalf("entry %q (stored %q) selects %q: %v", entry, stored, name, got)
		}
	})
}
