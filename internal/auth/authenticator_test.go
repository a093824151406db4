package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type touch struct {
	id string
	at time.Time
}

// fakeKeys is an in-memory KeyStore keyed by secret hash that records every call.
type fakeKeys struct {
	mu        sync.Mutex
	byHash    map[string]*KeyRecord
	lookups   int
	touches   []touch
	lookupErr error // returned by every lookup when set
	touchErr  error // returned by every touch when set (the touch is still recorded)
}

func newFakeKeys() *fakeKeys { return &fakeKeys{byHash: map[string]*KeyRecord{}} }

func (f *fakeKeys) add(secret string, k KeyRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k.SecretHash = HashSecret(secret)
	f.byHash[k.SecretHash] = &k
}

func (f *fakeKeys) AuthKey(_ context.Context, hash string) (KeyRecord, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	if f.lookupErr != nil {
		return KeyRecord{}, false, f.lookupErr
	}
	k, ok := f.byHash[hash]
	if !ok {
		return KeyRecord{}, false, nil
	}
	return *k, true, nil
}

func (f *fakeKeys) TouchAPIKey(_ context.Context, id string, at time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.touches = append(f.touches, touch{id, at})
	if f.touchErr != nil {
		return f.touchErr
	}
	for _, k := range f.byHash {
		if k.ID == id {
			t := at
			k.LastUsedAt = &t
		}
	}
	return nil
}

func (f *fakeKeys) touchCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.touches)
}

func (f *fakeKeys) lookupCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups
}

func mustSecret(t *testing.T, kind string) string {
	t.Helper()
	s, err := NewSecret(kind)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeClock is a settable clock for Authenticator.now.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time            { return c.t }
func (c *fakeClock) advance(d time.Duration)   { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock                 { return &fakeClock{t: time.Date(2026, 11, 22, 1, 24, 34, 0, time.UTC)} }
func withClock(a *Authenticator, c *fakeClock) { a.now = c.now }

func TestAuthenticateRejects(t *testing.T) {
	ctx := context.Background()
	keys := newFakeKeys()
	revokedAt := time.Now().Add(-time.Hour)

	revoked := mustSecret(t, KindSecret)
	keys.add(revoked, KeyRecord{ID: "key_revoked", OrgID: "org_1", App: "pay", Kind: KindSecret, RevokedAt: &revokedAt})
	// A secret presented as sk_ whose stored record is a tk_ key (and vice versa).
	skAsTk := mustSecret(t, KindSecret)
	keys.add(skAsTk, KeyRecord{ID: "key_sk_as_tk", OrgID: "org_1", App: "pay", Kind: KindResource, Actions: "read,write,approve,sign,developer"})
	tkAsSk := mustSecret(t, KindResource)
	keys.add(tkAsSk, KeyRecord{ID: "key_tk_as_sk", OrgID: "org_1", App: "pay", Kind: KindSecret})
	pkAsSk := mustSecret(t, KindPublishable)
	keys.add(pkAsSk, KeyRecord{ID: "key_pk_as_sk", OrgID: "org_1", App: "pay", Kind: KindSecret})
	// A record found under a hash that is not the hash of the presented secret.
	mismatched := mustSecret(t, KindSecret)
	keys.byHash[HashSecret(mismatched)] = &KeyRecord{ID: "key_mismatch", OrgID: "org_1", App: "pay", Kind: KindSecret, SecretHash: HashSecret("sk_somethingelse")}

	tests := []struct {
		name       string
		token      string
		wantLookup bool
	}{
		{"unknown sk", mustSecret(t, KindSecret), true},
		{"unknown tk", mustSecret(t, KindResource), true},
		{"unknown pk", mustSecret(t, KindPublishable), true},
		{"revoked", revoked, true},
		{"sk token, tk record", skAsTk, true},
		{"tk token, sk record", tkAsSk, true},
		{"pk token, sk record", pkAsSk, true},
		{"stored hash differs", mismatched, true},
		{"empty", "", false},
		{"no prefix", "abcdefghijklmnop", false},
		{"unknown prefix", "xk_abcdefghijklmnop", false},
		{"oauth client secret", "ocs_abcdefghijklmnop", false},
		{"prefix alone", "sk_", false},
		{"upper-case prefix", "SK_" + strings.TrimPrefix(revoked, "sk_"), false},
		{"too long", "sk_" + strings.Repeat("a", 600), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAuthenticator(keys)
			before := keys.lookupCount()
			touchesBefore := keys.touchCount()
			p, err := a.Authenticate(ctx, tc.token)
			if !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("Authenticate = %v, %v; want ErrUnauthenticated", p, err)
			}
			if p != nil {
				t.Fatalf("Authenticate returned a principal %+v with the error", p)
			}
			looked := keys.lookupCount() > before
			if looked != tc.wantLookup {
				t.Fatalf("store looked up: %v, want %v", looked, tc.wantLookup)
			}
			if keys.touchCount() != touchesBefore {
				t.Fatalf("a rejected token touched lastUsedAt")
			}
		})
	}
}

func TestAuthenticateStoreError(t *testing.T) {
	keys := newFakeKeys()
	boom := errors.New("database is down")
	keys.lookupErr = boom
	a := NewAuthenticator(keys)
	p, err := a.Authenticate(context.Background(), mustSecret(t, KindSecret))
	if err == nil {
		t.Fatalf("Authenticate = %+v, nil; want an error", p)
	}
	if errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a store failure was reported as ErrUnauthenticated: %v", err)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("error %v does not wrap the store's error", err)
	}
	if p != nil {
		t.Fatalf("principal %+v returned with an error", p)
	}
}

func TestAuthenticateKinds(t *testing.T) {
	ctx := context.Background()
	keys := newFakeKeys()
	sk := mustSecret(t, KindSecret)
	keys.add(sk, KeyRecord{ID: "key_sk", OrgID: "org_1", App: "trade", Kind: KindSecret})
	tk := mustSecret(t, KindResource)
	keys.add(tk, KeyRecord{ID: "key_tk", OrgID: "org_2", App: "pay", Kind: KindResource, Actions: "read,approve", ResourceIDs: "ord_a,ord_b"})
	tkOne := mustSecret(t, KindResource)
	keys.add(tkOne, KeyRecord{ID: "key_tk1", OrgID: "org_2", App: "earn", Kind: KindResource, Actions: "sign"})
	pk := mustSecret(t, KindPublishable)
	keys.add(pk, KeyRecord{ID: "key_pk", OrgID: "org_3", App: "borrow", Kind: KindPublishable})

	tests := []struct {
		name          string
		token         string
		wantOrg       string
		wantApp       string
		wantKind      string
		wantID        string
		wantActions   []string
		wantResources []string
	}{
		{"sk", sk, "org_1", "trade", KindSecret, "key_sk", AllActions, nil},
		{"tk", tk, "org_2", "pay", KindResource, "key_tk", []string{ActionRead, ActionApprove}, []string{"ord_a", "ord_b"}},
		{"tk single action", tkOne, "org_2", "earn", KindResource, "key_tk1", []string{ActionSign}, nil},
		{"pk", pk, "org_3", "borrow", KindPublishable, "key_pk", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewAuthenticator(keys).Authenticate(ctx, tc.token)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if p.OrgID != tc.wantOrg || p.App != tc.wantApp || p.Kind != tc.wantKind || p.ID != tc.wantID {
				t.Fatalf("principal = %+v, want org %s app %s kind %s id %s", p, tc.wantOrg, tc.wantApp, tc.wantKind, tc.wantID)
			}
			if !slices.Equal(p.Actions, tc.wantActions) {
				t.Fatalf("actions = %v, want %v", p.Actions, tc.wantActions)
			}
			if !slices.Equal(p.ResourceIDs, tc.wantResources) {
				t.Fatalf("resource ids = %v, want %v", p.ResourceIDs, tc.wantResources)
			}
			for _, app := range Apps {
				for _, action := range AllActions {
					want := app == tc.wantApp && slices.Contains(tc.wantActions, action) && tc.wantKind != KindPublishable
					if got := p.Can(app, action); got != want {
						t.Errorf("Can(%s, %s) = %v, want %v", app, action, got, want)
					}
				}
			}
		})
	}

	t.Run("sk actions are a copy", func(t *testing.T) {
		p, err := NewAuthenticator(keys).Authenticate(ctx, sk)
		if err != nil {
			t.Fatal(err)
		}
		p.Actions[0] = "tampered"
		if AllActions[0] != ActionRead {
			t.Fatalf("mutating a principal's actions changed AllActions: %v", AllActions)
		}
	})
}

func TestAuthenticateLastUsed(t *testing.T) {
	ctx := context.Background()
	keys := newFakeKeys()
	sk := mustSecret(t, KindSecret)
	keys.add(sk, KeyRecord{ID: "key_sk", OrgID: "org_1", App: "pay", Kind: KindSecret})
	clock := newFakeClock()
	a := NewAuthenticator(keys)
	withClock(a, clock)
	gran := a.lastUsedGranularity
	if gran <= 0 {
		t.Fatalf("lastUsedGranularity = %v, want positive", gran)
	}

	auth := func() {
		t.Helper()
		if _, err := a.Authenticate(ctx, sk); err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
	}
	auth()
	if len(keys.touches) != 1 {
		t.Fatalf("first use: %d touches, want 1", len(keys.touches))
	}
	if got := keys.touches[0]; got.id != "key_sk" || !got.at.Equal(clock.t) {
		t.Fatalf("first touch = %+v, want key_sk at %v", got, clock.t)
	}
	if keys.touches[0].at.Location() != time.UTC {
		t.Fatalf("touch time %v is not UTC", keys.touches[0].at)
	}

	clock.advance(gran / 2)
	auth()
	clock.advance(gran/2 - time.Nanosecond)
	auth()
	if len(keys.touches) != 1 {
		t.Fatalf("within the granularity: %d touches, want 1", len(keys.touches))
	}

	clock.advance(time.Nanosecond) // exactly one granularity after the first touch
	auth()
	if len(keys.touches) != 2 {
		t.Fatalf("after the granularity: %d touches, want 2", len(keys.touches))
	}
	if !keys.touches[1].at.Equal(clock.t) {
		t.Fatalf("second touch at %v, want %v", keys.touches[1].at, clock.t)
	}
	auth()
	if len(keys.touches) != 2 {
		t.Fatalf("right after the second touch: %d touches, want 2", len(keys.touches))
	}
	clock.advance(10 * gran)
	auth()
	if len(keys.touches) != 3 {
		t.Fatalf("long after: %d touches, want 3", len(keys.touches))
	}
}

func TestAuthenticateLastUsedNonUTCClock(t *testing.T) {
	keys := newFakeKeys()
	sk := mustSecret(t, KindSecret)
	keys.add(sk, KeyRecord{ID: "key_sk", OrgID: "org_1", App: "pay", Kind: KindSecret})
	a := NewAuthenticator(keys)
	loc := time.FixedZone("UTC+5", 5*3600)
	a.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, loc) }
	if _, err := a.Authenticate(context.Background(), sk); err != nil {
		t.Fatal(err)
	}
	if len(keys.touches) != 1 || keys.touches[0].at.Location() != time.UTC {
		t.Fatalf("touches = %+v, want one in UTC", keys.touches)
	}
}

func TestAuthenticateTouchFailureIsIgnored(t *testing.T) {
	keys := newFakeKeys()
	keys.touchErr = errors.New("read-only replica")
	tk := mustSecret(t, KindResource)
	keys.add(tk, KeyRecord{ID: "key_tk", OrgID: "org_1", App: "pay", Kind: KindResource, Actions: "read"})
	a := NewAuthenticator(keys)
	for i := 0; i < 2; i++ {
		p, err := a.Authenticate(context.Background(), tk)
		if err != nil {
			t.Fatalf("Authenticate with failing TouchAPIKey: %v", err)
		}
		if p == nil || p.ID != "key_tk" || !p.Can("pay", ActionRead) {
			t.Fatalf("principal = %+v", p)
		}
	}
	if keys.touchCount() != 2 {
		t.Fatalf("touches = %d, want 2 (the write is retried since it never succeeded)", keys.touchCount())
	}
}
