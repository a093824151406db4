package ids

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/opentreasury/treasury/dev/wait"
)

var allPrefixes = []string{Order, ApprovalItem, SigningRequest, Event, Wallet, APIKey, WebSocketConfig,
	WebhookConfig, OAuthClient, Organization, User, AuditLog}

func TestPrefixesDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range allPrefixes {
		if len(p) != 3 || strings.ToLower(p) != p || strings.Contains(p, "_") {
			t.Errorf("prefix %q is not three lower-case letters", p)
		}
		if seen[p] {
			t.Errorf("prefix %q used twice", p)
		}
		seen[p] = true
	}
}

func TestNewShape(t *testing.T) {
	for _, p := range allPrefixes {
		id := New(p)
		rest, ok := strings.CutPrefix(id, p+"_")
		if !ok {
			t.Fatalf("New(%q) = %q lacks the prefix", p, id)
		}
		if len(rest) != 32 {
			t.Fatalf("New(%q) = %q: %d characters after the prefix, want 32", p, id, len(rest))
		}
		if strings.ToLower(rest) != rest {
			t.Fatalf("New(%q) = %q is not lower-case hex", p, id)
		}
		raw, err := hex.DecodeString(rest)
		if err != nil {
			t.Fatalf("New(%q) = %q is not hex: %v", p, id, err)
		}
		u, err := uuid.FromBytes(raw)
		if err != nil {
			t.Fatal(err)
		}
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("New(%q) = %q is not a UUIDv7 (version %d, variant %v)", p, id, u.Version(), u.Variant())
		}
		// The embedded time is now (within a generous margin).
		sec, nsec := u.Time().UnixTime()
		if d := time.Since(time.Unix(sec, nsec)); d < -time.Minute || d > time.Minute {
			t.Fatalf("New(%q) = %q embeds a time %v away from now", p, id, d)
		}
	}
}

func TestNewUniqueAndSorted(t *testing.T) {
	const n = 20000
	seen := make(map[string]bool, n)
	prev := ""
	for i := 0; i < n; i++ {
		id := New(Order)
		if seen[id] {
			t.Fatalf("New repeated %q after %d calls", id, i)
		}
		seen[id] = true
		if prev != "" && id <= prev {
			t.Fatalf("call %d: %q does not sort after the previous id %q", i, id, prev)
		}
		prev = id
	}
}

func TestNewSortedAcrossMilliseconds(t *testing.T) {
	a := New(Event)
	made := time.Now()
	wait.For(t, time.Second, "the clock to pass the millisecond a was made in", func() bool {
		return time.Now().UnixMilli() > made.UnixMilli()
	})
	b := New(Event)
	if a >= b {
		t.Fatalf("%q made before %q sorts after it", a, b)
	}
}

func TestHasPrefix(t *testing.T) {
	good := New(Wallet)
	rest := strings.TrimPrefix(good, Wallet+"_")
	tests := []struct {
		name   string
		id     string
		prefix string
		want   bool
	}{
		{"new id", good, Wallet, true},
		{"upper-case hex", Wallet + "_" + strings.ToUpper(rest), Wallet, true},
		{"wrong prefix", good, Order, false},
		{"same body other prefix", Order + "_" + rest, Wallet, false},
		{"no separator", Wallet + rest, Wallet, false},
		{"other separator", Wallet + "-" + rest, Wallet, false},
		{"prefix only", Wallet + "_", Wallet, false},
		{"too short", good[:len(good)-1], Wallet, false},
		{"too long", good + "0", Wallet, false},
		{"too long by a byte", good + "00", Wallet, false},
		{"too short by a byte", good[:len(good)-2], Wallet, false},
		{"non-hex", Wallet + "_" + rest[:31] + "g", Wallet, false},
		{"non-hex z", Wallet + "_" + strings.Repeat("z", 32), Wallet, false},
		{"bare hex", rest, Wallet, false},
		{"empty", "", Wallet, false},
		{"empty prefix", good, "", false},
		{"prefix of prefix", good, "wa", false},
		{"leading space", " " + good, Wallet, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := HasPrefix(tc.id, tc.prefix); got != tc.want {
				t.Fatalf("HasPrefix(%q, %q) = %v, want %v", tc.id, tc.prefix, got, tc.want)
			}
		})
	}
	for _, p := range allPrefixes {
		if !HasPrefix(New(p), p) {
			t.Errorf("HasPrefix(New(%q), %q) = false", p, p)
		}
	}
}
