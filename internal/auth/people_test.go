package auth

import (
	"slices"
	"strings"
	"testing"
)

func TestPasswords(t *testing.T) {
	for _, weak := range []string{"", "short", strings.Repeat("x", MaxPasswordBytes+1)} {
		if _, err := HashPassword(weak); err != ErrWeakPassword {
			t.Errorf("HashPassword(%d bytes) = %v", len(weak), err)
		}
	}
	h, err := HashPassword("correct horse battery")
	if err != nil || strings.Contains(h, "correct") {
		t.Fatalf("hash %q %v", h, err)
	}
	if !PasswordMatches("correct horse battery", h) || PasswordMatches("correct horse batterY", h) || PasswordMatches("correct horse battery", "") {
		t.Fatal("PasswordMatches")
	}
	a, _ := NewPassword()
	b, _ := NewPassword()
	if len(a) != 24 || a == b {
		t.Fatalf("NewPassword %q %q", a, b)
	}
}

func TestCSRFTokensBelongToTheirSession(t *testing.T) {
	one, _ := NewSecret(KindSession)
	two, _ := NewSecret(KindSession)
	if CSRFToken(one) != CSRFToken(one) || CSRFToken(one) == CSRFToken(two) || strings.Contains(CSRFToken(one), one[4:12]) {
		t.Fatal("CSRFToken")
	}
	if !CSRFTokenMatches(one, CSRFToken(one)) || CSRFTokenMatches(one, CSRFToken(two)) || CSRFTokenMatches(one, "") {
		t.Fatal("CSRFTokenMatches")
	}
}

func TestPersonReachesTheAppsOfTheirGrants(t *testing.T) {
	p := &Principal{Kind: KindUser, ID: "usr_1", Grants: map[string][]string{"trade": {"read"}, "pay": {"read", "approve"}, "earn": nil}}
	if !p.Can("pay", ActionApprove) || p.Can("pay", ActionWrite) || !p.Can("trade", ActionRead) || p.Can("borrow", ActionRead) {
		t.Fatal("Can by grants")
	}
	if got := p.Apps(); !slices.Equal(got, []string{"pay", "trade"}) {
		t.Fatalf("Apps %v", got)
	}
	pay := p.InApp("pay")
	if pay.App != "pay" || !pay.Can("pay", ActionApprove) || pay.Can("trade", ActionRead) || p.App != "" || p.ActorType() != "user" {
		t.Fatalf("InApp %+v", pay)
	}
	key := &Principal{Kind: KindSecret, App: "pay", Actions: AllActions}
	if key.InApp("trade") != key || !slices.Equal(key.Apps(), []string{"pay"}) || key.ActorType() != "key" {
		t.Fatal("a key is not narrowed or widened")
	}
	if (&Principal{Kind: KindAccessToken}).ActorType() != "oauth_client" {
		t.Fatal("ActorType of a token")
	}
}
