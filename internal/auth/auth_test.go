package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func TestNewSecret(t *testing.T) {
	for _, kind := range []string{KindSecret, KindResource, KindPublishable} {
		t.Run(kind, func(t *testing.T) {
			const n = 1000
			seen := make(map[string]bool, n)
			for i := 0; i < n; i++ {
				s, err := NewSecret(kind)
				if err != nil {
					t.Fatalf("NewSecret(%q): %v", kind, err)
				}
				body, ok := strings.CutPrefix(s, kind+"_")
				if !ok {
					t.Fatalf("NewSecret(%q) = %q, want prefix %q", kind, s, kind+"_")
				}
				if got := KindOf(s); got != kind {
					t.Fatalf("KindOf(NewSecret(%q)) = %q", kind, got)
				}
				raw, err := base64.RawURLEncoding.DecodeString(body)
				if err != nil {
					t.Fatalf("secret body %q is not unpadded base64url: %v", body, err)
				}
				if len(raw)*8 < 256 {
					t.Fatalf("secret %q carries %d bits, want at least 256", s, len(raw)*8)
				}
				if seen[s] {
					t.Fatalf("NewSecret(%q) repeated %q after %d calls", kind, s, i)
				}
				seen[s] = true
			}
		})
	}
}

func TestHashSecret(t *testing.T) {
	a, b := "sk_alpha", "sk_beta"
	ha := HashSecret(a)
	if ha != HashSecret(a) {
		t.Fatal("HashSecret is not deterministic")
	}
	sum := sha256.Sum256([]byte(a))
	if want := hex.EncodeToString(sum[:]); ha != want {
		t.Fatalf("HashSecret(%q) = %q, want hex SHA-256 %q", a, ha, want)
	}
	if len(ha) != 64 || strings.ToLower(ha) != ha {
		t.Fatalf("HashSecret(%q) = %q, want 64 lower-case hex digits", a, ha)
	}
	if ha == HashSecret(b) {
		t.Fatalf("HashSecret(%q) == HashSecret(%q)", a, b)
	}
	if ha == a || strings.Contains(ha, "alpha") {
		t.Fatalf("HashSecret(%q) = %q reveals the secret", a, ha)
	}
}

func TestSecretMatches(t *testing.T) {
	secret, err := NewSecret(KindSecret)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewSecret(KindSecret)
	if err != nil {
		t.Fatal(err)
	}
	stored := HashSecret(secret)
	tests := []struct {
		name   string
		secret string
		hash   string
		want   bool
	}{
		{"same secret", secret, stored, true},
		{"other secret", other, stored, false},
		{"secret itself as hash", secret, secret, false},
		{"empty hash", secret, "", false},
		{"truncated hash", secret, stored[:63], false},
		{"upper-case hash", secret, strings.ToUpper(stored), false},
		{"empty secret", "", stored, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SecretMatches(tc.secret, tc.hash); got != tc.want {
				t.Fatalf("SecretMatches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct {
		token, want string
	}{
		{"sk_abc", KindSecret},
		{"tk_abc", KindResource},
		{"pk_abc", KindPublishable},
		{"sk_", ""},
		{"tk_", ""},
		{"pk_", ""},
		{"", ""},
		{"sk", ""},
		{"xk_abc", ""},
		{"SK_abc", ""},
		{"skabc", ""},
		{"ocs_abc", ""},
		{" sk_abc", ""},
		{"Bearer sk_abc", ""},
	}
	for _, tc := range tests {
		if got := KindOf(tc.token); got != tc.want {
			t.Errorf("KindOf(%q) = %q, want %q", tc.token, got, tc.want)
		}
	}
}

func TestPrincipalCan(t *testing.T) {
	sk := &Principal{OrgID: "org_1", App: "pay", Kind: KindSecret, ID: "key_sk", Actions: append([]string(nil), AllActions...)}
	tkRead := &Principal{OrgID: "org_1", App: "pay", Kind: KindResource, ID: "key_tk", Actions: []string{ActionRead}}
	pk := &Principal{OrgID: "org_1", App: "pay", Kind: KindPublishable, ID: "key_pk"}
	// A publishable key never acts, even if actions were somehow attached to it.
	pkWithActions := &Principal{OrgID: "org_1", App: "pay", Kind: KindPublishable, ID: "key_pk2", Actions: append([]string(nil), AllActions...)}
	var nilPrincipal *Principal

	type check struct {
		app, action string
		want        bool
	}
	var skChecks, tkChecks, denyAll []check
	for _, app := range Apps {
		for _, action := range AllActions {
			skChecks = append(skChecks, check{app, action, app == "pay"})
			tkChecks = append(tkChecks, check{app, action, app == "pay" && action == ActionRead})
			denyAll = append(denyAll, check{app, action, false})
		}
	}
	// Unknown apps and actions are never granted.
	for _, c := range []check{{"pay", "delete", false}, {"pay", "", false}, {"", ActionRead, false}, {"PAY", ActionRead, false}} {
		skChecks = append(skChecks, c)
		tkChecks = append(tkChecks, c)
		denyAll = append(denyAll, c)
	}

	tests := []struct {
		name   string
		p      *Principal
		checks []check
	}{
		{"sk of pay", sk, skChecks},
		{"tk read of pay", tkRead, tkChecks},
		{"pk", pk, denyAll},
		{"pk with actions", pkWithActions, denyAll},
		{"nil principal", nilPrincipal, denyAll},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.checks) < len(Apps)*len(AllActions) {
				t.Fatalf("only %d checks", len(tc.checks))
			}
			for _, c := range tc.checks {
				if got := tc.p.Can(c.app, c.action); got != c.want {
					t.Errorf("Can(%q, %q) = %v, want %v", c.app, c.action, got, c.want)
				}
			}
		})
	}
}

func TestPrincipalCanReach(t *testing.T) {
	unrestricted := &Principal{App: "pay", Kind: KindResource, Actions: []string{ActionRead}}
	restricted := &Principal{App: "pay", Kind: KindResource, Actions: []string{ActionRead}, ResourceIDs: []string{"ord_a", "wal_b"}}
	tests := []struct {
		name string
		p    *Principal
		id   string
		want bool
	}{
		{"unrestricted any id", unrestricted, "ord_anything", true},
		{"unrestricted empty id", unrestricted, "", true},
		{"restricted listed order", restricted, "ord_a", true},
		{"restricted listed wallet", restricted, "wal_b", true},
		{"restricted unlisted", restricted, "ord_c", false},
		{"restricted prefix of listed", restricted, "ord_", false},
		{"restricted empty id", restricted, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.CanReach(tc.id); got != tc.want {
				t.Fatalf("CanReach(%q) = %v, want %v", tc.id, got, tc.want)
			}
		})
	}
}

func TestActionsRoundTrip(t *testing.T) {
	if got := ParseActions(""); got != nil {
		t.Fatalf("ParseActions(\"\") = %#v, want nil", got)
	}
	in := []string{ActionRead, ActionApprove}
	s := FormatActions(in)
	if s != "read,approve" {
		t.Fatalf("FormatActions = %q", s)
	}
	out := ParseActions(s)
	if len(out) != 2 || out[0] != ActionRead || out[1] != ActionApprove {
		t.Fatalf("ParseActions(%q) = %#v", s, out)
	}
}

func TestHint(t *testing.T) {
	secret, err := NewSecret(KindSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := Hint(secret)
	if !strings.HasPrefix(h, "sk_") || !strings.HasPrefix(secret, strings.TrimSuffix(h, "…")) {
		t.Fatalf("Hint(%q) = %q", secret, h)
	}
	if len(strings.TrimSuffix(h, "…")) >= len(secret)/2 {
		t.Fatalf("Hint(%q) = %q reveals too much of the secret", secret, h)
	}
}
