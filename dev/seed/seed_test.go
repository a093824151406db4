package seed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/crypto/bcrypt"

	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

var testURLs = URLs{BaseURL: "http://127.0.0.1:8080", WSURL: "ws://127.0.0.1:8080", TemporalUIURL: "http://127.0.0.1:8233"}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func ensure(t *testing.T, s *store.Store, dir string, urls URLs) *Credentials {
	t.Helper()
	c, err := Ensure(context.Background(), s, dir, urls, quietLog)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if c == nil {
		t.Fatal("Ensure returned nil credentials")
	}
	return c
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// object decodes a JSON object and checks that it has exactly the given keys.
func object(t *testing.T, where string, raw json.RawMessage, keys ...string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not a JSON object: %v", where, err)
	}
	want := slices.Clone(keys)
	sort.Strings(want)
	if got := sortedKeys(m); !slices.Equal(got, want) {
		t.Fatalf("%s has keys %v, want %v", where, got, want)
	}
	return m
}

func str(t *testing.T, where string, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a JSON string: %s", where, raw)
	}
	if s == "" {
		t.Fatalf("%s is empty", where)
	}
	return s
}

func TestEnsureWritesPrivateFiles(t *testing.T) {
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	ensure(t, s, dir, testURLs)
	for _, name := range []string{CredentialsFile, SignerKeysFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !fi.Mode().IsRegular() {
			t.Fatalf("%s is not a regular file", name)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Fatalf("%s has mode %o, want 600", name, perm)
		}
	}
	// No temporary files are left behind.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if want := []string{CredentialsFile, SignerKeysFile}; !slices.Equal(names, want) {
		t.Fatalf("data dir holds %v, want %v", names, want)
	}
	// A rerun rewrites the credentials file and keeps it private.
	ensure(t, s, dir, URLs{BaseURL: "http://other"})
	fi, err := os.Stat(filepath.Join(dir, CredentialsFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("after a rerun %s has mode %o, want 600", CredentialsFile, perm)
	}
}

func TestCredentialsFileShape(t *testing.T) {
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	creds := ensure(t, s, dir, testURLs)
	raw := readFile(t, filepath.Join(dir, CredentialsFile))

	top := object(t, "credentials.json", raw,
		"baseUrl", "wsUrl", "temporalUiUrl", "orgId", "owner", "member", "keys", "secondApprover", "oauthClients", "approverKeys", "wallets", "otherOrg", "solanaFailAddress")
	for field, want := range map[string]string{"baseUrl": testURLs.BaseURL, "wsUrl": testURLs.WSURL, "temporalUiUrl": testURLs.TemporalUIURL} {
		if got := str(t, field, top[field]); got != want {
			t.Errorf("%s = %q, want %q", field, got, want)
		}
	}
	orgID := str(t, "orgId", top["orgId"])
	if !ids.HasPrefix(orgID, ids.Organization) || orgID != creds.OrgID {
		t.Errorf("orgId = %q (returned %q)", orgID, creds.OrgID)
	}

	owner := object(t, "owner", top["owner"], "email", "password")
	if got := str(t, "owner.email", owner["email"]); got != "owner@example.com" {
		t.Errorf("owner.email = %q", got)
	}
	if pw := str(t, "owner.password", owner["password"]); len(pw) < 16 {
		t.Errorf("owner.password %q is too short", pw)
	}

	// Every secret in the file, to check none is repeated.
	var secrets []string
	secret := func(where string, raw json.RawMessage, kind string) string {
		t.Helper()
		v := str(t, where, raw)
		if auth.KindOf(v) != kind {
			t.Errorf("%s = %q, want a %s_ key", where, v, kind)
		}
		secrets = append(secrets, v)
		return v
	}

	keys := object(t, "keys", top["keys"], "treasury", "pay", "trade", "earn", "borrow")
	tk := object(t, "keys.treasury", keys["treasury"], "sk", "pk", "read")
	secret("keys.treasury.sk", tk["sk"], auth.KindSecret)
	secret("keys.treasury.pk", tk["pk"], auth.KindPublishable)
	secret("keys.treasury.read", tk["read"], auth.KindResource)
	for _, app := range []string{"pay", "trade", "earn", "borrow"} {
		k := object(t, "keys."+app, keys[app], "sk", "pk", "approve", "sign", "read")
		secret("keys."+app+".sk", k["sk"], auth.KindSecret)
		secret("keys."+app+".pk", k["pk"], auth.KindPublishable)
		for _, name := range []string{"approve", "sign", "read"} {
			secret("keys."+app+"."+name, k[name], auth.KindResource)
		}
	}

	second := object(t, "secondApprover", top["secondApprover"], "pay", "trade", "earn", "borrow")
	for app, v := range second {
		secret("secondApprover."+app, v, auth.KindResource)
	}

	oauth := object(t, "oauthClients", top["oauthClients"], "trade")
	trade := object(t, "oauthClients.trade", oauth["trade"], "clientId", "clientSecret", "scopes")
	if id := str(t, "clientId", trade["clientId"]); !ids.HasPrefix(id, ids.OAuthClient) {
		t.Errorf("oauthClients.trade.clientId = %q", id)
	}
	secrets = append(secrets, str(t, "clientSecret", trade["clientSecret"]))
	if got := str(t, "scopes", trade["scopes"]); got != "trade:read trade:write" {
		t.Errorf("oauthClients.trade.scopes = %q", got)
	}

	var wallets []json.RawMessage
	if err := json.Unmarshal(top["wallets"], &wallets); err != nil {
		t.Fatalf("wallets is not an array: %v", err)
	}
	if len(wallets) != 6 {
		t.Fatalf("%d wallets, want 6", len(wallets))
	}
	for i, w := range wallets {
		var probe struct {
			AutoSign *bool `json:"autoSign"`
		}
		if err := json.Unmarshal(w, &probe); err != nil || probe.AutoSign == nil {
			t.Fatalf("wallets[%d] has no boolean autoSign: %s", i, w)
		}
		where := fmt.Sprintf("wallets[%d]", i)
		var m map[string]json.RawMessage
		if *probe.AutoSign {
			m = object(t, where, w, "id", "chain", "address", "scheme", "autoSign")
		} else {
			m = object(t, where, w, "id", "chain", "address", "scheme", "autoSign", "privateKey")
			secrets = append(secrets, str(t, where+".privateKey", m["privateKey"]))
		}
		if id := str(t, where+".id", m["id"]); !ids.HasPrefix(id, ids.Wallet) {
			t.Errorf("%s.id = %q", where, id)
		}
	}

	other := object(t, "otherOrg", top["otherOrg"], "orgId", "keys")
	otherID := str(t, "otherOrg.orgId", other["orgId"])
	if !ids.HasPrefix(otherID, ids.Organization) || otherID == orgID {
		t.Errorf("otherOrg.orgId = %q (orgId %q)", otherID, orgID)
	}
	otherKeys := object(t, "otherOrg.keys", other["keys"], "pay")
	otherPay := object(t, "otherOrg.keys.pay", otherKeys["pay"], "sk")
	secret("otherOrg.keys.pay.sk", otherPay["sk"], auth.KindSecret)

	seen := map[string]bool{}
	for _, v := range secrets {
		if seen[v] {
			t.Errorf("secret %q appears twice", v)
		}
		seen[v] = true
	}
	if len(secrets) != 3+4*5+4+1+1+2 { // … and the two manual wallets' keys
		t.Errorf("counted %d secrets", len(secrets))
	}

	// The returned credentials are what the file holds.
	var fromFile Credentials
	if err := json.Unmarshal(raw, &fromFile); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&fromFile, creds) {
		t.Fatalf("returned credentials differ from the file:\n file %+v\n  ret %+v", fromFile, *creds)
	}
}

func TestSeededWallets(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	creds := ensure(t, s, dir, testURLs)

	chains := map[string]int{}
	var manual []Wallet
	for _, w := range creds.Wallets {
		chains[w.Chain]++
		if !w.AutoSign {
			manual = append(manual, w)
		} else if w.PrivateKey != "" {
			t.Errorf("autoSign wallet %s carries a private key", w.ID)
		}
	}
	if want := map[string]int{"ethereum": 3, "polygon": 1, "solana": 2}; !reflect.DeepEqual(chains, want) {
		t.Fatalf("wallets per chain = %v, want %v", chains, want)
	}
	if len(manual) != 2 || manual[0].Chain != "ethereum" || manual[1].Chain != "solana" {
		t.Fatalf("manual wallets = %+v, want one on ethereum and one on solana", manual)
	}
	if creds.SolanaFailAddress != devsvm.FrozenOwner {
		t.Fatalf("solanaFailAddress = %q, want the dev Solana chain's frozen owner %s", creds.SolanaFailAddress, devsvm.FrozenOwner)
	}
	if n, err := s.CountWallets(ctx, creds.OrgID); err != nil || n != int64(len(creds.Wallets)) {
		t.Fatalf("CountWallets = %d, %v; want %d", n, err, len(creds.Wallets))
	}
	listed, err := s.ListWallets(ctx, creds.OrgID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var listedIDs, credIDs []string
	for _, w := range listed {
		listedIDs = append(listedIDs, w.ID)
	}
	for _, w := range creds.Wallets {
		credIDs = append(credIDs, w.ID)
	}
	sort.Strings(listedIDs)
	sort.Strings(credIDs)
	if !slices.Equal(listedIDs, credIDs) {
		t.Fatalf("store wallets %v, credentials wallets %v", listedIDs, credIDs)
	}

	checkKey := func(w Wallet, key *keys.Key) {
		t.Helper()
		sw, err := s.Wallet(ctx, creds.OrgID, w.ID)
		if err != nil {
			t.Fatalf("store.Wallet(%s): %v", w.ID, err)
		}
		if sw.PublicKey != key.PublicKey() || sw.Scheme != key.Scheme || w.Scheme != key.Scheme {
			t.Fatalf("wallet %s: stored public key %s (%s) does not match its private key (%s)", w.ID, sw.PublicKey, sw.Scheme, key.PublicKey())
		}
		if sw.Chain != w.Chain || sw.AutoSign != w.AutoSign || sw.OrgID != creds.OrgID {
			t.Fatalf("wallet %s stored as %+v, credentials say %+v", w.ID, sw, w)
		}
		if sw.Address != w.Address || sw.Address != addressOf(key) {
			t.Fatalf("wallet %s address %s, credentials %s, want %s", w.ID, sw.Address, w.Address, addressOf(key))
		}
		want := chain.Secp256k1
		if w.Chain == "solana" {
			want = chain.Ed25519
		}
		if key.Scheme != want {
			t.Fatalf("wallet %s on %s signs with %s, want %s", w.ID, w.Chain, key.Scheme, want)
		}
		// A signature made with the key verifies against the stored wallet.
		digest := sha256.Sum256([]byte("pay 1 USDC"))
		sig, err := key.Sign(digest[:])
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Verify(sw.Scheme, sw.Address, sw.PublicKey, digest[:], sig); err != nil {
			t.Fatalf("wallet %s: a signature with its key does not verify: %v", w.ID, err)
		}
	}

	priv, err := keys.Parse(manual[0].Scheme, manual[0].PrivateKey)
	if err != nil {
		t.Fatalf("manual wallet private key %q is not a %s key: %v", manual[0].PrivateKey, manual[0].Scheme, err)
	}
	if len(strings.TrimPrefix(manual[0].PrivateKey, "0x")) != 64 {
		t.Fatalf("the manual wallet's secp256k1 key is the hex of 32 bytes, got %q", manual[0].PrivateKey)
	}
	checkKey(manual[0], priv)
	// The Solana one's is a base64 seed whose public key, in base58, is its address.
	solKey, err := keys.Parse(chain.Ed25519, manual[1].PrivateKey)
	if err != nil || manual[1].Scheme != chain.Ed25519 || solKey.SolanaAddress() != manual[1].Address {
		t.Fatalf("the manual Solana wallet %+v: its key does not make its address (%v)", manual[1], err)
	}
	checkKey(manual[1], solKey)

	signer, err := LoadSignerKeys(dir)
	if err != nil {
		t.Fatalf("LoadSignerKeys: %v", err)
	}
	var autoIDs []string
	for _, w := range creds.Wallets {
		if w.AutoSign {
			autoIDs = append(autoIDs, w.ID)
			key, ok := signer[w.ID]
			if !ok {
				t.Fatalf("dev signer has no key for autoSign wallet %s", w.ID)
			}
			checkKey(w, key)
		}
	}
	sort.Strings(autoIDs)
	if got := sortedKeys(signer); !slices.Equal(got, autoIDs) {
		t.Fatalf("dev signer keys for %v, want exactly the autoSign wallets %v", got, autoIDs)
	}
	for _, m := range manual {
		if _, ok := signer[m.ID]; ok {
			t.Fatalf("dev signer holds the manual wallet %s's key", m.ID)
		}
	}

	// Another organisation cannot see these wallets.
	if _, err := s.Wallet(ctx, creds.OtherOrg.OrgID, manual[0].ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org reads the demo wallet: %v", err)
	}
	if n, err := s.CountWallets(ctx, creds.OtherOrg.OrgID); err != nil || n != 1 {
		t.Fatalf("other org has %d wallets (%v), want 1", n, err)
	}
}

// checkKeys authenticates every seeded secret against the store.
func checkKeys(t *testing.T, s *store.Store, creds *Credentials) {
	t.Helper()
	ctx := context.Background()
	a := auth.NewAuthenticator(s)
	authenticate := func(what, secret string) *auth.Principal {
		t.Helper()
		p, err := a.Authenticate(ctx, secret)
		if err != nil {
			t.Fatalf("%s (%q) does not authenticate: %v", what, secret, err)
		}
		return p
	}
	expect := func(what string, p *auth.Principal, org, app, kind string, actions []string) {
		t.Helper()
		if p.OrgID != org || p.App != app || p.Kind != kind {
			t.Errorf("%s: org %s app %s kind %s; want org %s app %s kind %s", what, p.OrgID, p.App, p.Kind, org, app, kind)
		}
		if !slices.Equal(p.Actions, actions) {
			t.Errorf("%s: actions %v, want %v", what, p.Actions, actions)
		}
		if len(p.ResourceIDs) != 0 {
			t.Errorf("%s: restricted to resources %v", what, p.ResourceIDs)
		}
		if !ids.HasPrefix(p.ID, ids.APIKey) {
			t.Errorf("%s: key id %q", what, p.ID)
		}
		for _, other := range auth.Apps {
			for _, action := range auth.AllActions {
				want := other == app && kind != auth.KindPublishable && slices.Contains(actions, action)
				if got := p.Can(other, action); got != want {
					t.Errorf("%s: Can(%s, %s) = %v, want %v", what, other, action, got, want)
				}
			}
		}
	}

	if got := sortedKeys(creds.Keys); !slices.Equal(got, []string{"borrow", "earn", "pay", "trade", "treasury"}) {
		t.Fatalf("keys for apps %v", got)
	}
	keyIDs := map[string]string{}
	record := func(what string, p *auth.Principal) {
		t.Helper()
		if prev, ok := keyIDs[p.ID]; ok {
			t.Errorf("%s and %s are the same key record %s", what, prev, p.ID)
		}
		keyIDs[p.ID] = what
	}
	for app, k := range creds.Keys {
		for _, c := range []struct {
			name, secret, kind string
			actions            []string
		}{
			{"sk", k.SK, auth.KindSecret, auth.AllActions},
			{"pk", k.PK, auth.KindPublishable, nil},
			{"read", k.Read, auth.KindResource, []string{auth.ActionRead}},
			{"approve", k.Approve, auth.KindResource, []string{auth.ActionApprove}},
			{"sign", k.Sign, auth.KindResource, []string{auth.ActionSign}},
		} {
			what := "keys." + app + "." + c.name
			if c.secret == "" {
				if app == "treasury" && (c.name == "approve" || c.name == "sign") {
					continue
				}
				t.Errorf("%s is missing", what)
				continue
			}
			if app == "treasury" && (c.name == "approve" || c.name == "sign") {
				t.Errorf("%s exists; treasury has no approve or sign key", what)
			}
			p := authenticate(what, c.secret)
			expect(what, p, creds.OrgID, app, c.kind, c.actions)
			record(what, p)
		}
	}
	if got := sortedKeys(creds.SecondApprover); !slices.Equal(got, []string{"borrow", "earn", "pay", "trade"}) {
		t.Fatalf("secondApprover for apps %v", got)
	}
	for app, secret := range creds.SecondApprover {
		what := "secondApprover." + app
		if secret == creds.Keys[app].Approve {
			t.Errorf("%s is the same secret as keys.%s.approve", what, app)
		}
		p := authenticate(what, secret)
		expect(what, p, creds.OrgID, app, auth.KindResource, []string{auth.ActionApprove})
		record(what, p) // a distinct key record from keys.<app>.approve
	}

	otherSK := creds.OtherOrg.Keys["pay"]["sk"]
	p := authenticate("otherOrg.keys.pay.sk", otherSK)
	expect("otherOrg.keys.pay.sk", p, creds.OtherOrg.OrgID, "pay", auth.KindSecret, auth.AllActions)
	record("otherOrg.keys.pay.sk", p)
	if creds.OtherOrg.OrgID == creds.OrgID {
		t.Error("the other org is the demo org")
	}

	oc, ok := creds.OAuthClients["trade"]
	if !ok {
		t.Fatal("no trade OAuth client")
	}
	client, err := s.OAuthClient(ctx, oc.ClientID)
	if err != nil {
		t.Fatalf("OAuth client %s: %v", oc.ClientID, err)
	}
	if client.OrgID != creds.OrgID || client.App != "trade" || client.Scopes != oc.Scopes || client.RevokedAt != nil ||
		!auth.SecretMatches(oc.ClientSecret, client.SecretHash) {
		t.Errorf("stored OAuth client %+v does not match %+v", client, oc)
	}

	u, err := s.UserByEmail(ctx, creds.Owner.Email)
	if err != nil {
		t.Fatalf("owner: %v", err)
	}
	if u.OrgID != creds.OrgID || u.Role != "owner" {
		t.Errorf("owner stored as %+v", u)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(creds.Owner.Password)); err != nil {
		t.Errorf("owner password does not match the stored hash: %v", err)
	}
	// The owner signs in with the password of the file and holds every action on every app.
	sess, err := service.NewSessions(s, auth.NewAuthenticator(s), time.Minute, nil, quietLog).
		SignIn(ctx, creds.Owner.Email, creds.Owner.Password, "127.0.0.1", "test")
	if err != nil {
		t.Fatalf("the owner cannot sign in: %v", err)
	}
	for _, app := range auth.Apps {
		for _, a := range auth.AllActions {
			if !sess.Principal.Can(app, a) {
				t.Errorf("the owner, signed in, cannot %s on %s", a, app)
			}
		}
	}
}

func TestSeededKeysAuthenticate(t *testing.T) {
	s := storetest.NewSQLite(t)
	creds := ensure(t, s, t.TempDir(), testURLs)
	checkKeys(t, s, creds)
}

func TestSeededBalancesAndPrices(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	creds := ensure(t, s, t.TempDir(), testURLs)

	prices, err := s.Prices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantPrices := map[string]string{"ETH": "3000", "WBTC": "60000", "USDC": "1", "MATIC": "0.5", "SOL": "150"}
	if got := sortedKeys(prices); !slices.Equal(got, sortedKeys(wantPrices)) {
		t.Fatalf("priced assets %v, want %v", got, sortedKeys(wantPrices))
	}
	for asset, want := range wantPrices {
		if !prices[asset].USDPrice.Equal(decimal.RequireFromString(want)) {
			t.Errorf("price of %s = %s, want %s", asset, prices[asset].USDPrice, want)
		}
	}

	positions, err := s.ListPositions(ctx, creds.OrgID, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]map[string]decimal.Decimal{}
	for _, p := range positions {
		if held[p.WalletID] == nil {
			held[p.WalletID] = map[string]decimal.Decimal{}
		}
		held[p.WalletID][p.Asset] = p.Amount
	}
	autoEth := map[string]string{"ETH": "1000", "USDC": "10000000", "WBTC": "10"}
	for _, w := range creds.Wallets {
		var want map[string]string
		switch {
		case w.Chain == "ethereum" && w.AutoSign:
			want = autoEth
		case w.Chain == "ethereum":
			want = map[string]string{"ETH": "100", "USDC": "1000000"}
		case w.Chain == "polygon":
			want = map[string]string{"MATIC": "100000", "USDC": "1000000"}
		case w.Chain == "solana":
			want = map[string]string{"SOL": "10000", "USDC": "1000000"}
		default:
			t.Fatalf("unexpected wallet %+v", w)
		}
		got := held[w.ID]
		if !slices.Equal(sortedKeys(got), sortedKeys(want)) {
			t.Errorf("%s wallet (autoSign %v) holds %v, want %v", w.Chain, w.AutoSign, got, want)
			continue
		}
		for asset, amt := range want {
			if !got[asset].Equal(decimal.RequireFromString(amt)) {
				t.Errorf("%s wallet (autoSign %v): %s %s, want %s", w.Chain, w.AutoSign, got[asset], asset, amt)
			}
		}
		sw, err := s.Wallet(ctx, creds.OrgID, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if sw.SyncedAt == nil {
			t.Errorf("wallet %s has never been synced", w.ID)
		}
	}
	if len(held) != len(creds.Wallets) {
		t.Errorf("positions in %d wallets, want %d", len(held), len(creds.Wallets))
	}
	for _, p := range positions {
		for _, w := range creds.Wallets {
			if w.ID == p.WalletID && w.Chain != p.Chain {
				t.Errorf("position %+v on chain %s, wallet is on %s", p, p.Chain, w.Chain)
			}
		}
	}
}

func TestSeededPolicies(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	creds := ensure(t, s, t.TempDir(), testURLs)

	for _, app := range auth.Apps {
		t.Run(app, func(t *testing.T) {
			p, err := s.Policy(ctx, creds.OrgID, app)
			if err != nil {
				t.Fatalf("policy of %s: %v", app, err)
			}
			r, err := policy.Parse([]byte(p.Document))
			if err != nil {
				t.Fatalf("policy of %s does not parse: %v\n%s", app, err, p.Document)
			}
			if r.MaxOrderUSD == nil || !r.MaxOrderUSD.Equal(decimal.RequireFromString("5000000")) {
				t.Errorf("maxOrderUsd = %v, want 5000000", r.MaxOrderUSD)
			}
			if r.DailyVolumeUSD != nil {
				t.Errorf("dailyVolumeUsd = %v, want none", r.DailyVolumeUSD)
			}
			if len(r.ApprovalTiers) != 2 ||
				!r.ApprovalTiers[0].MinUSD.Equal(decimal.RequireFromString("10000")) || r.ApprovalTiers[0].Quorum != 1 ||
				!r.ApprovalTiers[1].MinUSD.Equal(decimal.RequireFromString("1000000")) || r.ApprovalTiers[1].Quorum != 2 {
				t.Errorf("approvalTiers = %+v, want [10000→1, 1000000→2]", r.ApprovalTiers)
			}
			for usd, want := range map[string]int{"9999.99": 0, "10000": 1, "999999.99": 1, "1000000": 2, "5000000": 2} {
				if got := r.Quorum(decimal.RequireFromString(usd)); got != want {
					t.Errorf("Quorum(%s) = %d, want %d", usd, got, want)
				}
			}

			var wantWhitelist []string
			var wantDenied [][2]string
			var wantProtocols []string
			switch app {
			case "pay":
				wantWhitelist = []string{
					"0x1111111111111111111111111111111111111111",
					"0x2222222222222222222222222222222222222222",
					"0x000000000000000000000000000000000000dEaD",
					"C68HJbL4YDuM47YaQrB7vQGKLVtTKkxifD2XgUtaXTss",
					"CxDJemSRqPZXCTCeAXjroaaXKbuYT6BX33TsNdTXenj8",
					devsvm.FrozenOwner,
				}
			case "trade":
				wantDenied = [][2]string{{"WBTC", "USDC"}}
			case "earn", "borrow":
				wantProtocols = []string{"aave", "compound"}
			}
			if !slices.Equal(r.DestinationWhitelist, wantWhitelist) {
				t.Errorf("destinationWhitelist = %v, want %v", r.DestinationWhitelist, wantWhitelist)
			}
			if !slices.Equal(r.DeniedPairs, wantDenied) {
				t.Errorf("deniedPairs = %v, want %v", r.DeniedPairs, wantDenied)
			}
			if !slices.Equal(r.AllowedProtocols, wantProtocols) {
				t.Errorf("allowedProtocols = %v, want %v", r.AllowedProtocols, wantProtocols)
			}
			if len(r.AllowedPairs) != 0 {
				t.Errorf("allowedPairs = %v, want none", r.AllowedPairs)
			}
		})
	}
	if EVMFailAddress != "0x000000000000000000000000000000000000dEaD" || EVMFailAddress != devevm.Dead.Hex() {
		t.Errorf("EVMFailAddress = %s, not the address SPEC 3.6 documents, where the dev EVM chains revert (%s)", EVMFailAddress, devevm.Dead.Hex())
	}
}

// seededCount counts the organization.seeded audit records of an org: one per seeding.
func seededCount(t *testing.T, s *store.Store, orgID string) int {
	t.Helper()
	logs, err := s.ListAudit(context.Background(), orgID, auth.Apps, nil, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range logs {
		if l.Action == "organization.seeded" {
			n++
		}
	}
	return n
}

func TestEnsureIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	first := ensure(t, s, dir, testURLs)
	credPath := filepath.Join(dir, CredentialsFile)
	signerPath := filepath.Join(dir, SignerKeysFile)
	credBytes := readFile(t, credPath)
	signerBytes := readFile(t, signerPath)

	for i := 0; i < 2; i++ {
		again := ensure(t, s, dir, testURLs)
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("rerun %d returned different credentials:\n first %+v\n again %+v", i+1, *first, *again)
		}
		if !bytes.Equal(readFile(t, credPath), credBytes) {
			t.Fatalf("rerun %d changed %s", i+1, CredentialsFile)
		}
		if !bytes.Equal(readFile(t, signerPath), signerBytes) {
			t.Fatalf("rerun %d changed %s", i+1, SignerKeysFile)
		}
	}
	if n, err := s.CountWallets(ctx, first.OrgID); err != nil || n != 6 {
		t.Fatalf("after reruns the org has %d wallets (%v), want 6", n, err)
	}
	if n, err := s.CountWallets(ctx, first.OtherOrg.OrgID); err != nil || n != 1 {
		t.Fatalf("after reruns the other org has %d wallets (%v), want 1", n, err)
	}
	if n := seededCount(t, s, first.OrgID); n != 1 {
		t.Fatalf("organisation seeded %d times, want 1", n)
	}
	refs, err := s.ListWalletRefs(ctx, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 7 {
		t.Fatalf("the store holds %d wallets over all organisations, want 7 (a second organisation was created?)", len(refs))
	}
	checkKeys(t, s, first)
}

func TestEnsureRerunUpdatesOnlyURLs(t *testing.T) {
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	first := ensure(t, s, dir, testURLs)
	newURLs := URLs{BaseURL: "http://127.0.0.1:9090", WSURL: "ws://127.0.0.1:9090", TemporalUIURL: "http://127.0.0.1:9233"}
	second := ensure(t, s, dir, newURLs)
	if second.BaseURL != newURLs.BaseURL || second.WSURL != newURLs.WSURL || second.TemporalUIURL != newURLs.TemporalUIURL {
		t.Fatalf("rerun URLs = %s %s %s, want %+v", second.BaseURL, second.WSURL, second.TemporalUIURL, newURLs)
	}
	var onDisk Credentials
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, CredentialsFile)), &onDisk); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&onDisk, second) {
		t.Fatalf("file %+v differs from the returned credentials %+v", onDisk, *second)
	}
	// Apart from the URLs, nothing changed.
	onDisk.BaseURL, onDisk.WSURL, onDisk.TemporalUIURL = first.BaseURL, first.WSURL, first.TemporalUIURL
	if !reflect.DeepEqual(&onDisk, first) {
		t.Fatalf("a rerun with new URLs changed more than the URLs:\n before %+v\n  after %+v", *first, onDisk)
	}
	if n := seededCount(t, s, first.OrgID); n != 1 {
		t.Fatalf("organisation seeded %d times, want 1", n)
	}
	checkKeys(t, s, second)
}

func TestEnsureMissingSignerKeysIsAnError(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	first := ensure(t, s, dir, testURLs)
	credPath := filepath.Join(dir, CredentialsFile)
	credBytes := readFile(t, credPath)
	if err := os.Remove(filepath.Join(dir, SignerKeysFile)); err != nil {
		t.Fatal(err)
	}
	c, err := Ensure(ctx, s, dir, testURLs, quietLog)
	if err == nil {
		t.Fatalf("Ensure without %s = %+v, nil; want an error", SignerKeysFile, c)
	}
	if !strings.Contains(err.Error(), SignerKeysFile) {
		t.Errorf("error %q does not name %s", err, SignerKeysFile)
	}
	if c != nil {
		t.Errorf("credentials returned with the error: %+v", c)
	}
	// Nothing was reseeded or overwritten.
	if !bytes.Equal(readFile(t, credPath), credBytes) {
		t.Error("the failed Ensure rewrote credentials.json")
	}
	if _, err := os.Stat(filepath.Join(dir, SignerKeysFile)); !os.IsNotExist(err) {
		t.Errorf("the failed Ensure recreated %s (%v)", SignerKeysFile, err)
	}
	if n := seededCount(t, s, first.OrgID); n != 1 {
		t.Errorf("organisation seeded %d times, want 1", n)
	}
	refs, err := s.ListWalletRefs(ctx, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 7 {
		t.Errorf("the store holds %d wallets, want 7", len(refs))
	}
	checkKeys(t, s, first)
}

func TestEnsureReseedsFreshStoreFromFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first := ensure(t, storetest.NewSQLite(t), dir, testURLs)
	signerBefore := readFile(t, filepath.Join(dir, SignerKeysFile))

	// The store was removed, the data directory kept.
	fresh := storetest.NewSQLite(t)
	again := ensure(t, fresh, dir, testURLs)
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("reseeding a fresh store changed the credentials:\n before %+v\n  after %+v", *first, *again)
	}
	if !bytes.Equal(readFile(t, filepath.Join(dir, SignerKeysFile)), signerBefore) {
		t.Fatal("reseeding a fresh store changed the dev signer keys")
	}
	if ok, err := fresh.OrganizationExists(ctx, first.OrgID); err != nil || !ok {
		t.Fatalf("demo org not in the fresh store: %v, %v", ok, err)
	}
	if ok, err := fresh.OrganizationExists(ctx, first.OtherOrg.OrgID); err != nil || !ok {
		t.Fatalf("other org not in the fresh store: %v, %v", ok, err)
	}
	if n, err := fresh.CountWallets(ctx, first.OrgID); err != nil || n != 6 {
		t.Fatalf("fresh store: %d wallets (%v), want 6", n, err)
	}
	checkKeys(t, fresh, again)

	// The wallet keys of the file still match the wallets of the fresh store.
	signer, err := LoadSignerKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	all, err := WalletKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range again.Wallets {
		key := all[w.ID]
		if w.AutoSign && signer[w.ID].PublicKey() != key.PublicKey() {
			t.Fatalf("wallet %s: the dev signer's key is not the wallet's", w.ID)
		}
		sw, err := fresh.Wallet(ctx, again.OrgID, w.ID)
		if err != nil {
			t.Fatalf("wallet %s: %v", w.ID, err)
		}
		if sw.PublicKey != key.PublicKey() {
			t.Fatalf("wallet %s: fresh store key %s does not match the data dir's key", w.ID, sw.PublicKey)
		}
	}

	// And a second run on the reseeded store does not seed again.
	ensure(t, fresh, dir, testURLs)
	if n := seededCount(t, fresh, first.OrgID); n != 1 {
		t.Fatalf("fresh store seeded %d times, want 1", n)
	}
}

func TestEnsureCorruptCredentialsFile(t *testing.T) {
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	path := filepath.Join(dir, CredentialsFile)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := Ensure(context.Background(), s, dir, testURLs, quietLog); err == nil {
		t.Fatalf("Ensure over a corrupt credentials file = %+v, nil; want an error", c)
	}
	if got := readFile(t, path); string(got) != "{not json" {
		t.Fatalf("the corrupt file was overwritten: %q", got)
	}
}

func TestLoadSignerKeysMissingAndBad(t *testing.T) {
	dir := t.TempDir()
	keys, err := LoadSignerKeys(dir)
	if err != nil || len(keys) != 0 {
		t.Fatalf("LoadSignerKeys on an empty dir = %v, %v; want no keys, no error", keys, err)
	}
	if err := os.WriteFile(filepath.Join(dir, CredentialsFile),
		[]byte(`{"wallets": [{"id": "wal_x", "chain": "ethereum", "scheme": "secp256k1", "autoSign": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SignerKeysFile), []byte(`{"wal_x": "c2hvcnQ="}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSignerKeys(dir); err == nil {
		t.Fatal("LoadSignerKeys accepted a key that is not the hex of 32 bytes")
	}
}

// A data directory seeded before keeps the policies it holds: a rerun of a newer seed
// (here, one that denies another pair) never overwrites what is stored.
func TestEnsureKeepsTheStoredPolicies(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	first := ensure(t, s, dir, testURLs)
	older := `{"deniedPairs":[["WBTC","SOL"]]}`
	if err := s.PublishPolicy(ctx, &store.Policy{OrgID: first.OrgID, App: "trade", Document: older, UpdatedBy: "an older seed",
		UpdatedAt: time.Now()}, &store.PolicyVersion{}); err != nil {
		t.Fatal(err)
	}
	ensure(t, s, dir, testURLs)
	p, err := s.Policy(ctx, first.OrgID, "trade")
	if err != nil || p.Document != older || p.UpdatedBy != "an older seed" {
		t.Fatalf("after a rerun the trade policy is %+v (%v), want the stored one kept", p, err)
	}
}

// The seed makes a second person, the member, with Approve and Developer on every app and a
// password of its own in credentials.json; earn's policy asks for one change approval and
// the other apps' none.
func TestTheSeededMemberApprovesAndDevelopsOnEveryApp(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	creds := ensure(t, s, dir, testURLs)
	checkMember := func(c *Credentials) {
		t.Helper()
		if c.Member.Email != "member@example.com" || len(c.Member.Password) < 12 || c.Member.Password == c.Owner.Password {
			t.Fatalf("the member's sign-in: %+v", c.Member)
		}
		u, err := s.UserByEmail(ctx, c.Member.Email)
		if err != nil || u.OrgID != c.OrgID || u.Role != auth.RoleMember || bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(c.Member.Password)) != nil {
			t.Fatalf("the member: %+v %v", u, err)
		}
		perms, err := s.MemberPermissions(ctx, u.ID)
		if err != nil || len(perms) != len(auth.Apps) {
			t.Fatalf("the member's permissions: %+v %v", perms, err)
		}
		for _, p := range perms {
			if p.Actions != auth.FormatActions([]string{auth.ActionApprove, auth.ActionDeveloper}) {
				t.Fatalf("on %s the member holds %q", p.App, p.Actions)
			}
		}
	}
	checkMember(creds)
	for _, app := range auth.Apps {
		rules, _, err := s.PolicyRules(ctx, creds.OrgID, app, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[app == "earn"]; rules.ChangeApprovals != want {
			t.Fatalf("%s's policy asks for %d change approvals, want %d", app, rules.ChangeApprovals, want)
		}
	}

}

func TestTheSeededApprovingKeysCarryApproverKeys(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewSQLite(t)
	dir := t.TempDir()
	creds := ensure(t, s, dir, testURLs)
	check := func(c *Credentials) {
		t.Helper()
		if got := sortedKeys(c.ApproverKeys); !slices.Equal(got, []string{"borrow", "earn", "pay", "trade"}) {
			t.Fatalf("approver keys for %v", got)
		}
		for app, ak := range c.ApproverKeys {
			for secret, seeded := range map[string]ApproverKey{c.Keys[app].Approve: ak.Approve, c.SecondApprover[app]: ak.SecondApprover} {
				credential, err := s.APIKeyBySecretHash(ctx, auth.HashSecret(secret))
				if err != nil || credential.ApproverKeyID == nil || *credential.ApproverKeyID != seeded.KeyID {
					t.Fatalf("%s: the key %+v names no approver key %s (%v)", app, credential, seeded.KeyID, err)
				}
				stored, err := s.ApproverKey(ctx, c.OrgID, seeded.KeyID)
				if err != nil || stored.CredentialID == nil || *stored.CredentialID != credential.ID || stored.RevokedAt != nil {
					t.Fatalf("%s: approver key %+v (%v)", app, stored, err)
				}
				// The private half in the credentials signs what the stored public half verifies.
				private, err := keys.Parse(seeded.Scheme, seeded.PrivateKey)
				if err != nil {
					t.Fatal(err)
				}
				digest := approvers.DecisionDigest("APPROVE", []byte(`{"orderId":"ord_1"}`))
				sig, err := private.Sign(digest)
				if err != nil {
					t.Fatal(err)
				}
				pub, err := approvers.ParsePublicKey(stored.Scheme, stored.PublicKey)
				if err != nil || approvers.Verify(stored.Scheme, pub, digest, sig) != nil {
					t.Fatalf("%s: a signature of the seeded private key does not verify under %s (%v)", app, stored.ID, err)
				}
			}
		}
	}
	check(creds)
}

// The seed makes the demo organisation as an operator and its owner would, through the
// service's operations: their audit records are there, the owner's one-time link is used,
// each wallet was registered with a signed challenge (TestSeededBalancesAndPrices reads
// the balances its sync found).
func TestTheSeedGoesThroughTheServicesDoors(t *testing.T) {
	storetest.ForEachDialect(t, testTheSeedGoesThroughTheServicesDoors)
}

func testTheSeedGoesThroughTheServicesDoors(t *testing.T, s *store.Store) {
	ctx := context.Background()
	creds := ensure(t, s, t.TempDir(), testURLs)
	counts := map[string]int{}
	actors := map[string]map[string]bool{}
	before := ""
	for {
		logs, err := s.ListAudit(ctx, creds.OrgID, auth.Apps, nil, before, 200)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range logs {
			counts[l.Action]++
			if actors[l.Action] == nil {
				actors[l.Action] = map[string]bool{}
			}
			actors[l.Action][l.ActorType+":"+l.ActorID] = true
		}
		if len(logs) < 200 {
			break
		}
		before = logs[len(logs)-1].ID
	}
	owner, err := s.UserByEmail(ctx, creds.Owner.Email)
	if err != nil {
		t.Fatal(err)
	}
	keyCount := 0
	for _, k := range creds.Keys {
		for _, secret := range []string{k.SK, k.PK, k.Read, k.Approve, k.Sign} {
			if secret != "" {
				keyCount++
			}
		}
	}
	keyCount += len(creds.SecondApprover)
	for action, want := range map[string]int{
		"organization.created": 1, "member.added": 1, "member.permissions_changed": len(auth.Apps) - 1,
		"api_key.created": keyCount, "oauth_client.created": len(creds.OAuthClients),
		"wallet.registered": len(creds.Wallets), "policy.published": len(auth.Apps), seededAction: 1,
	} {
		if counts[action] != want {
			t.Errorf("%d %s audit records, want %d (all: %v)", counts[action], action, want, counts)
		}
	}
	for action, want := range map[string]string{
		"organization.created": "operator:operator", "member.added": "user:" + owner.ID,
		"wallet.registered": "user:" + owner.ID, "policy.published": "user:" + owner.ID, "api_key.created": "system:" + seedActor,
	} {
		if len(actors[action]) != 1 || !actors[action][want] {
			t.Errorf("%s made by %v, want %s", action, actors[action], want)
		}
	}
	for _, w := range creds.Wallets {
		stored, err := s.Wallet(ctx, creds.OrgID, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.CreatedBy != owner.ID || stored.AutoSign != w.AutoSign {
			t.Errorf("wallet %s: created by %q, autoSign %v; want the owner, %v", w.ID, stored.CreatedBy, stored.AutoSign, w.AutoSign)
		}
		if w.Chain == "solana" && !keys.IsSolanaAddress(w.Address) {
			t.Errorf("the solana wallet's address %s is not a base58 public key", w.Address)
		}
	}
}

// A seed that stopped half way leaves an organisation without its seeded record: the next
// start says so instead of serving half an organisation.
func TestAnInterruptedSeedIsNotTakenForAFinishedOne(t *testing.T) {
	storetest.ForEachDialect(t, testAnInterruptedSeedIsNotTakenForAFinishedOne)
}

func testAnInterruptedSeedIsNotTakenForAFinishedOne(t *testing.T, s *store.Store) {
	ctx := context.Background()
	dir := t.TempDir()
	// Someone else signs in as the member already: the seed stops at the member.
	if _, err := (&service.Service{Store: s, Log: quietLog}).CreateOrganization(ctx, "Squatter", "member@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(ctx, s, dir, testURLs, quietLog); err == nil || !strings.Contains(err.Error(), "the member") {
		t.Fatalf("Ensure with the member's address taken = %v, want the member's error", err)
	}
	_, err := Ensure(ctx, s, dir, testURLs, quietLog)
	if err == nil || !strings.Contains(err.Error(), "partly made") {
		t.Fatalf("Ensure after an interrupted seed = %v, want it to say the organisation was partly made", err)
	}
}

// BenchmarkEnsureOnAFreshStore is the seed's cost on a new SQLite database: the whole
// demo organisation, through the service's operations.
func BenchmarkEnsureOnAFreshStore(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, dir := storetest.NewSQLite(b), b.TempDir()
		b.StartTimer()
		if _, err := Ensure(context.Background(), s, dir, testURLs, quietLog); err != nil {
			b.Fatal(err)
		}
	}
}

// A credentials file that does not name what this seed makes (here, an older file's hex
// Solana address) is refused before a new database is seeded from it, and left as it is.
func TestAnOlderCredentialsFileDoesNotSeedANewDatabase(t *testing.T) {
	dir := t.TempDir()
	creds := ensure(t, storetest.NewSQLite(t), dir, testURLs)
	for i, w := range creds.Wallets {
		if w.Chain == "solana" {
			creds.Wallets[i].Address = strings.Repeat("ab", 32)
		}
	}
	if err := writeJSON(filepath.Join(dir, CredentialsFile), creds); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, filepath.Join(dir, CredentialsFile))
	fresh := storetest.NewSQLite(t)
	if _, err := Ensure(context.Background(), fresh, dir, testURLs, quietLog); err == nil || !strings.Contains(err.Error(), "cannot seed a new database") {
		t.Fatalf("Ensure from an older file = %v, want a refusal", err)
	}
	if !bytes.Equal(readFile(t, filepath.Join(dir, CredentialsFile)), before) {
		t.Fatal("the refused file was rewritten")
	}
	if ok, err := fresh.OrganizationExists(context.Background(), creds.OrgID); err != nil || ok {
		t.Fatalf("the organisation was made anyway: %v %v", ok, err)
	}
}
