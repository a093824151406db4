package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// cachedAuthenticator authenticates through a cache over keys, both on clock.
func cachedAuthenticator(keys *fakeKeys, clock *fakeClock, maxAge time.Duration) (*Authenticator, *CachedKeys) {
	cache := NewCachedKeys(keys, maxAge)
	cache.now = clock.now
	a := NewAuthenticator(cache)
	withClock(a, clock)
	return a, cache
}

func revoke(keys *fakeKeys, id string, at time.Time) {
	keys.mu.Lock()
	defer keys.mu.Unlock()
	for _, k := range keys.byHash {
		if k.ID == id {
			k.RevokedAt = &at
		}
	}
}

func TestCachedKeysReadAKeyOnceUntilItsMaxAge(t *testing.T) {
	ctx := context.Background()
	keys, clock := newFakeKeys(), newFakeClock()
	secret := mustSecret(t, KindSecret)
	keys.add(secret, KeyRecord{ID: "key_1", OrgID: "org_1", App: "pay", Kind: KindSecret})
	a, _ := cachedAuthenticator(keys, clock, 30*time.Second)

	for range 5 {
		if _, err := a.Authenticate(ctx, secret); err != nil {
			t.Fatal(err)
		}
		clock.advance(time.Second)
	}
	if n := keys.lookupCount(); n != 1 {
		t.Fatalf("5 requests within the max age read the key %d times, want 1", n)
	}
	// lastUsedAt was written once, and the cache knows it: no write per request.
	if n := keys.touchCount(); n != 1 {
		t.Fatalf("lastUsedAt written %d times, want 1", n)
	}
	clock.advance(time.Minute)
	if _, err := a.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if n := keys.lookupCount(); n != 2 {
		t.Fatalf("a request past the max age did not read the key again (%d reads)", n)
	}
}

// Once the revocation is announced (Forget), the key fails at once, even though the cache
// held it; without an announcement it fails at the latest after the max age.
func TestCachedKeysRefuseARevokedKeyOnceForgottenOrAfterTheMaxAge(t *testing.T) {
	ctx := context.Background()
	keys, clock := newFakeKeys(), newFakeClock()
	announced, silent := mustSecret(t, KindSecret), mustSecret(t, KindResource)
	keys.add(announced, KeyRecord{ID: "key_announced", OrgID: "org_1", App: "pay", Kind: KindSecret})
	keys.add(silent, KeyRecord{ID: "key_silent", OrgID: "org_1", App: "pay", Kind: KindResource, Actions: "read"})
	a, cache := cachedAuthenticator(keys, clock, 30*time.Second)
	for _, s := range []string{announced, silent} {
		if _, err := a.Authenticate(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	revoke(keys, "key_announced", clock.now())
	revoke(keys, "key_silent", clock.now())
	cache.Forget("key_announced")
	if _, err := a.Authenticate(ctx, announced); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a revoked key whose revocation was announced: %v, want ErrUnauthenticated", err)
	}
	if _, err := a.Authenticate(ctx, silent); err != nil {
		t.Fatalf("the other key, its revocation not announced, is still served from the cache within its max age: %v", err)
	}
	clock.advance(30 * time.Second)
	if _, err := a.Authenticate(ctx, silent); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a revoked key past the max age: %v, want ErrUnauthenticated", err)
	}
}

// racingKeys answers a lookup with the record as it was, and lets the revocation and its
// announcement happen while that answer is on its way back.
type racingKeys struct {
	*fakeKeys
	during func()
}

func (r *racingKeys) AuthKey(ctx context.Context, hash string) (KeyRecord, bool, error) {
	k, ok, err := r.fakeKeys.AuthKey(ctx, hash)
	if r.during != nil {
		r.during()
		r.during = nil
	}
	return k, ok, err
}

// A lookup that read the key before its revocation and returns after the announcement
// answers that one request (it began first) but leaves nothing in the cache.
func TestCachedKeysDoNotKeepALookupThatPredatesAnAnnouncement(t *testing.T) {
	ctx := context.Background()
	keys, clock := newFakeKeys(), newFakeClock()
	secret := mustSecret(t, KindSecret)
	keys.add(secret, KeyRecord{ID: "key_1", OrgID: "org_1", App: "pay", Kind: KindSecret})
	racing := &racingKeys{fakeKeys: keys}
	cache := NewCachedKeys(racing, time.Hour)
	cache.now = clock.now
	a := NewAuthenticator(cache)
	withClock(a, clock)
	racing.during = func() {
		revoke(keys, "key_1", clock.now())
		cache.Forget("key_1")
	}
	if _, err := a.Authenticate(ctx, secret); err != nil {
		t.Fatalf("the request whose lookup began before the revocation: %v", err)
	}
	if _, err := a.Authenticate(ctx, secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("the next request: %v, want ErrUnauthenticated (the stale lookup was kept)", err)
	}
}

func TestCachedKeysForgetAllAfterMissedAnnouncements(t *testing.T) {
	ctx := context.Background()
	keys, clock := newFakeKeys(), newFakeClock()
	secret := mustSecret(t, KindSecret)
	keys.add(secret, KeyRecord{ID: "key_1", OrgID: "org_1", App: "pay", Kind: KindSecret})
	a, cache := cachedAuthenticator(keys, clock, time.Hour)
	if _, err := a.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	revoke(keys, "key_1", clock.now())
	cache.ForgetAll()
	if _, err := a.Authenticate(ctx, secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after ForgetAll: %v, want ErrUnauthenticated", err)
	}
}

// tokenKeys is a fakeKeys that also stores access tokens.
type tokenKeys struct {
	*fakeKeys
	tokens map[string]*TokenRecord
}

func (k *tokenKeys) AuthAccessToken(_ context.Context, hash string) (TokenRecord, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lookups++
	t, ok := k.tokens[hash]
	if !ok {
		return TokenRecord{}, false, nil
	}
	return *t, true, nil
}

// Revoking an OAuth client ends every cached token of it; a cached token still expires
// on time.
func TestCachedKeysEndAClientsTokensAndKeepTheirExpiry(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	keys := &tokenKeys{fakeKeys: newFakeKeys(), tokens: map[string]*TokenRecord{}}
	a1, a2, other := "at_one1234567890", "at_two1234567890", "at_three12345678"
	for tok, client := range map[string]string{a1: "ocl_1", a2: "ocl_1", other: "ocl_2"} {
		keys.tokens[HashSecret(tok)] = &TokenRecord{TokenHash: HashSecret(tok), ClientID: client, OrgID: "org_1", App: "pay",
			Actions: "read", ExpiresAt: clock.now().Add(10 * time.Minute)}
	}
	cache := NewCachedKeys(keys, time.Hour)
	cache.now = clock.now
	a := NewAuthenticator(cache)
	withClock(a, clock)
	for _, tok := range []string{a1, a2, other} {
		if _, err := a.Authenticate(ctx, tok); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
	}
	reads := keys.lookupCount()
	if _, err := a.Authenticate(ctx, other); err != nil || keys.lookupCount() != reads {
		t.Fatalf("a cached token was read again (%v)", err)
	}
	for _, r := range keys.tokens {
		if r.ClientID == "ocl_1" {
			r.ClientRevoked = true
		}
	}
	cache.Forget("ocl_1")
	for _, tok := range []string{a1, a2} {
		if _, err := a.Authenticate(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("a token of the revoked client: %v, want ErrUnauthenticated", err)
		}
	}
	if _, err := a.Authenticate(ctx, other); err != nil {
		t.Fatalf("another client's token: %v", err)
	}
	clock.advance(10 * time.Minute)
	if _, err := a.Authenticate(ctx, other); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("an expired token served from the cache: %v, want ErrUnauthenticated", err)
	}
}

// sessionKeys is a fakeKeys that also stores one person's sessions.
type sessionKeys struct {
	*fakeKeys
	sessions map[string]SessionRecord
	person   PersonRecord
	grants   map[string]string
	reads    int
}

func (k *sessionKeys) AuthSession(_ context.Context, hash string) (SessionRecord, PersonRecord, bool, error) {
	k.reads++
	s, ok := k.sessions[hash]
	return s, k.person, ok, nil
}

func (k *sessionKeys) AuthGrants(context.Context, string) (map[string]string, error) {
	return k.grants, nil
}

// Sessions pass through the cache to the store on every request: a member's grants and a
// sign-out apply to their next request.
func TestCachedKeysReadSessionsThroughEveryTime(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	token := "ses_" + strings.Repeat("s", 40)
	keys := &sessionKeys{fakeKeys: newFakeKeys(), person: PersonRecord{ID: "usr_1", OrgID: "org_1", Role: RoleMember},
		grants: map[string]string{"pay": "read"},
		sessions: map[string]SessionRecord{HashSecret(token): {TokenHash: HashSecret(token), UserID: "usr_1", OrgID: "org_1",
			CreatedAt: clock.now(), ExpiresAt: clock.now().Add(time.Hour)}}}
	a := NewAuthenticator(NewCachedKeys(keys, time.Hour))
	withClock(a, clock)
	p, err := a.AuthenticateSession(ctx, token)
	if err != nil || !p.Can("pay", ActionRead) || p.Can("pay", ActionWrite) {
		t.Fatalf("session through the cache: %+v, %v", p, err)
	}
	keys.grants = map[string]string{"pay": "read,write"}
	if p, err := a.AuthenticateSession(ctx, token); err != nil || !p.Can("pay", ActionWrite) || keys.reads != 2 {
		t.Fatalf("a changed grant did not apply to the next request (%d reads): %+v, %v", keys.reads, p, err)
	}
}

// An organisation disabled (announced as ForgetOrg) refuses its keys at once, the cached
// ones included; another organisation's cached keys stay cached.
func TestCachedKeysRefuseADisabledOrganisationsKeysOnceAnnounced(t *testing.T) {
	ctx := context.Background()
	keys, clock := newFakeKeys(), newFakeClock()
	disabled, other := mustSecret(t, KindSecret), mustSecret(t, KindSecret)
	keys.add(disabled, KeyRecord{ID: "key_1", OrgID: "org_disabled", App: "pay", Kind: KindSecret})
	keys.add(other, KeyRecord{ID: "key_2", OrgID: "org_other", App: "pay", Kind: KindSecret})
	a, cache := cachedAuthenticator(keys, clock, 30*time.Second)
	for _, s := range []string{disabled, other} {
		if _, err := a.Authenticate(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	keys.mu.Lock()
	keys.byHash[HashSecret(disabled)].OrgDisabled = true
	keys.mu.Unlock()
	if _, err := a.Authenticate(ctx, disabled); err != nil {
		t.Fatalf("before the announcement the cached key is still served: %v", err)
	}
	cache.ForgetOrg("org_disabled")
	if _, err := a.Authenticate(ctx, disabled); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a key of a disabled organisation, announced: %v, want ErrUnauthenticated", err)
	}
	reads := keys.lookupCount()
	if _, err := a.Authenticate(ctx, other); err != nil || keys.lookupCount() != reads {
		t.Fatalf("another organisation's key: %v, read again %d times", err, keys.lookupCount()-reads)
	}
}
