package auth

import (
	"context"
	"sync"
	"time"
)

// CachedKeys remembers the keys and access tokens the authenticator found, so that a
// busy credential costs no read of the store per request. A credential's only change
// after it is issued is its revocation: the process that revokes it announces that on the
// bus, and every process Forgets it then, before answering anything else with it. A
// remembered credential is read again after MaxAge in any case, which bounds how long a
// revocation whose announcement was lost goes unseen. Unknown tokens are not remembered:
// a key works the moment it is created.
type CachedKeys struct {
	keys     KeyStore
	tokens   TokenStore
	sessions SessionStore
	maxAge   time.Duration
	now      func() time.Time
	// limit bounds the entries; past it the cache starts afresh.
	limit int

	mu sync.Mutex
	// generation counts forgettings: a lookup that began before one does not store its
	// answer, which may predate the revocation.
	generation uint64
	byHash     map[string]cachedCredential
}

type cachedCredential struct {
	key   *KeyRecord
	token *TokenRecord
	until time.Time
}

// id is the credential the entry belongs to: the key, or the access token's client.
func (c cachedCredential) id() string {
	if c.key != nil {
		return c.key.ID
	}
	return c.token.ClientID
}

// orgID is the organisation of the entry's credential.
func (c cachedCredential) orgID() string {
	if c.key != nil {
		return c.key.OrgID
	}
	return c.token.OrgID
}

// NewCachedKeys remembers keys' lookups for at most maxAge. keys may also be a
// TokenStore, whose access tokens are then remembered too, and a SessionStore, whose
// sessions are read through every time (a person's grants apply to their next request).
func NewCachedKeys(keys KeyStore, maxAge time.Duration) *CachedKeys {
	tokens, _ := keys.(TokenStore)
	sessions, _ := keys.(SessionStore)
	return &CachedKeys{keys: keys, tokens: tokens, sessions: sessions, maxAge: maxAge, now: time.Now, limit: 10000,
		byHash: map[string]cachedCredential{}}
}

// AuthSession reads a session from the store; sessions are not remembered.
func (c *CachedKeys) AuthSession(ctx context.Context, hash string) (SessionRecord, PersonRecord, bool, error) {
	if c.sessions == nil {
		return SessionRecord{}, PersonRecord{}, false, nil
	}
	return c.sessions.AuthSession(ctx, hash)
}

// AuthGrants reads a member's grants from the store.
func (c *CachedKeys) AuthGrants(ctx context.Context, userID string) (map[string]string, error) {
	if c.sessions == nil {
		return nil, nil
	}
	return c.sessions.AuthGrants(ctx, userID)
}

// lookup answers from the cache, or else asks read and remembers a found credential.
func (c *CachedKeys) lookup(hash string, read func() (cachedCredential, bool, error)) (cachedCredential, bool, error) {
	c.mu.Lock()
	e, ok := c.byHash[hash]
	now := c.now()
	if ok && now.Before(e.until) {
		c.mu.Unlock()
		return e, true, nil
	}
	gen := c.generation
	c.mu.Unlock()
	e, found, err := read()
	if err != nil || !found {
		return e, found, err
	}
	e.until = now.Add(c.maxAge)
	c.mu.Lock()
	if c.generation == gen {
		if len(c.byHash) >= c.limit {
			c.byHash = map[string]cachedCredential{}
		}
		c.byHash[hash] = e
	}
	c.mu.Unlock()
	return e, true, nil
}

// AuthKey finds a key by its secret's hash, from the cache when it is there.
func (c *CachedKeys) AuthKey(ctx context.Context, hash string) (KeyRecord, bool, error) {
	e, found, err := c.lookup(hash, func() (cachedCredential, bool, error) {
		k, found, err := c.keys.AuthKey(ctx, hash)
		return cachedCredential{key: &k}, found, err
	})
	if !found || err != nil || e.key == nil {
		return KeyRecord{}, false, err
	}
	return *e.key, true, nil
}

// AuthAccessToken finds an access token by its hash, from the cache when it is there.
func (c *CachedKeys) AuthAccessToken(ctx context.Context, hash string) (TokenRecord, bool, error) {
	if c.tokens == nil {
		return TokenRecord{}, false, nil
	}
	e, found, err := c.lookup(hash, func() (cachedCredential, bool, error) {
		t, found, err := c.tokens.AuthAccessToken(ctx, hash)
		return cachedCredential{token: &t}, found, err
	})
	if !found || err != nil || e.token == nil {
		return TokenRecord{}, false, err
	}
	return *e.token, true, nil
}

// TouchAPIKey records a key's use, and remembers it, so that the next requests within
// the authenticator's granularity write nothing.
func (c *CachedKeys) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	err := c.keys.TouchAPIKey(ctx, id, at)
	c.mu.Lock()
	for hash, e := range c.byHash {
		if e.key != nil && e.key.ID == id {
			k := *e.key
			k.LastUsedAt = &at
			e.key = &k
			c.byHash[hash] = e
		}
	}
	c.mu.Unlock()
	return err
}

// Forget drops a credential (a key, or an OAuth client with all its tokens): its next
// use reads the store.
func (c *CachedKeys) Forget(credentialID string) {
	c.forget(func(e cachedCredential) bool { return e.id() == credentialID })
}

// ForgetOrg drops every credential of an organisation (disabled by the operator).
func (c *CachedKeys) ForgetOrg(orgID string) {
	c.forget(func(e cachedCredential) bool { return e.orgID() == orgID })
}

// forget drops the entries that match; a lookup under way keeps nothing it read.
func (c *CachedKeys) forget(match func(cachedCredential) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	for hash, e := range c.byHash {
		if match(e) {
			delete(c.byHash, hash)
		}
	}
}

// ForgetAll drops every credential: announcements may have been missed.
func (c *CachedKeys) ForgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation++
	c.byHash = map[string]cachedCredential{}
}
