package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

var ctx = context.Background()

func mustOrg(t *testing.T, s *store.Store) string {
	t.Helper()
	id := ids.New(ids.Organization)
	if err := s.CreateOrganization(ctx, &store.Organization{ID: id, Name: "Acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return id
}

func mustWallet(t *testing.T, s *store.Store, org, chain string) *store.Wallet {
	t.Helper()
	w := &store.Wallet{ID: ids.New(ids.Wallet), OrgID: org, Chain: chain, Address: ids.New("addr"), PublicKey: "pk", CreatedAt: time.Now()}
	if err := s.CreateWallet(ctx, w); err != nil {
		t.Fatal(err)
	}
	return w
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestMigrateIsIdempotent(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		if err := s.Migrate(ctx, nil); err != nil {
			t.Fatalf("second migrate: %v", err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAPIKeyLookupRevokeAndTouch(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		k := &store.APIKey{ID: ids.New(ids.APIKey), OrgID: org, App: "pay", Kind: "tk", Actions: "read,approve",
			SecretHash: "hash-1", SecretHint: "tk_abc", CreatedAt: time.Now()}
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		got, err := s.APIKeyBySecretHash(ctx, "hash-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != k.ID || got.App != "pay" || got.Actions != "read,approve" || got.RevokedAt != nil || got.LastUsedAt != nil {
			t.Fatalf("unexpected key %+v", got)
		}
		if _, err := s.APIKeyBySecretHash(ctx, "hash-unknown"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown hash: want ErrNotFound, got %v", err)
		}
		used := time.Date(2026, 11, 22, 1, 2, 3, 456_000_000, time.UTC)
		if err := s.TouchAPIKey(ctx, k.ID, used); err != nil {
			t.Fatal(err)
		}
		if revoked, err := s.CredentialRevoked(ctx, k.ID); err != nil || revoked {
			t.Fatalf("a live key: revoked %v, %v", revoked, err)
		}
		if revoked, err := s.CredentialRevoked(ctx, ids.New(ids.APIKey)); err != nil || !revoked {
			t.Fatalf("an unknown key counts as revoked: revoked %v, %v", revoked, err)
		}
		if err := s.RevokeAPIKey(ctx, "org_other", k.ID, time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("revoking another org's key must be not found, got %v", err)
		}
		if err := s.RevokeAPIKey(ctx, org, k.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeAPIKey(ctx, org, k.ID, time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second revoke: want ErrNotFound, got %v", err)
		}
		got, err = s.APIKeyBySecretHash(ctx, "hash-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.RevokedAt == nil || got.LastUsedAt == nil || !got.LastUsedAt.Equal(used) {
			t.Fatalf("revokedAt/lastUsedAt not kept: %+v", got)
		}
		if revoked, err := s.CredentialRevoked(ctx, k.ID); err != nil || !revoked {
			t.Fatalf("a revoked key: revoked %v, %v", revoked, err)
		}
	})
}

func TestSecretHashIsUnique(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		for i, want := range []bool{true, false} {
			err := s.CreateAPIKey(ctx, &store.APIKey{ID: ids.New(ids.APIKey), OrgID: org, App: "pay", Kind: "sk",
				SecretHash: "same", SecretHint: "sk_", CreatedAt: time.Now()})
			if (err == nil) != want {
				t.Fatalf("insert %d: err=%v, want success=%v", i, err, want)
			}
		}
	})
}

func TestBalancesAreExactAndReplaced(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		other := mustOrg(t, s)
		w := mustWallet(t, s, org, "ethereum")
		ow := mustWallet(t, s, other, "ethereum")
		first := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
		huge := "123456789012345678901234567890.000000000000000001"
		if err := s.ReplaceBalances(ctx, w.ID, map[string]decimal.Decimal{"ETH": dec(huge), "USDC": dec("0.10")}, first); err != nil {
			t.Fatal(err)
		}
		if err := s.ReplaceBalances(ctx, ow.ID, map[string]decimal.Decimal{"ETH": dec("1")}, first); err != nil {
			t.Fatal(err)
		}
		ps, err := s.ListPositions(ctx, org, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 2 || ps[0].Asset != "ETH" || ps[1].Asset != "USDC" {
			t.Fatalf("positions of org: %+v", ps)
		}
		if !ps[0].Amount.Equal(dec(huge)) || ps[0].Amount.String() != huge {
			t.Fatalf("amount lost precision: %s", ps[0].Amount)
		}
		if ps[0].Chain != "ethereum" || !ps[0].SyncedAt.Equal(first) {
			t.Fatalf("position fields: %+v", ps[0])
		}
		second := first.Add(time.Minute)
		if err := s.ReplaceBalances(ctx, w.ID, map[string]decimal.Decimal{"USDC": dec("5")}, second); err != nil {
			t.Fatal(err)
		}
		ps, err = s.ListPositions(ctx, org, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 1 || ps[0].Asset != "USDC" || !ps[0].Amount.Equal(dec("5")) || !ps[0].SyncedAt.Equal(second) {
			t.Fatalf("after replace: %+v", ps)
		}
		last, err := s.LastWalletSync(ctx, org)
		if err != nil || last == nil || !last.Equal(second) {
			t.Fatalf("last sync: %v %v", last, err)
		}
		if none, err := s.LastWalletSync(ctx, "org_without_wallets"); err != nil || none != nil {
			t.Fatalf("no wallets, no sync time: %v %v", none, err)
		}
	})
}

func TestPositionPaging(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		now := time.Now()
		var want []string
		for range 3 {
			w := mustWallet(t, s, org, "polygon")
			if err := s.ReplaceBalances(ctx, w.ID, map[string]decimal.Decimal{"MATIC": dec("1"), "USDC": dec("2")}, now); err != nil {
				t.Fatal(err)
			}
			want = append(want, w.ID+"/MATIC", w.ID+"/USDC")
		}
		var got []string
		var after *store.PositionKey
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("paging does not end")
			}
			ps, err := s.ListPositions(ctx, org, after, 4)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				got = append(got, p.WalletID+"/"+p.Asset)
			}
			if len(ps) < 4 {
				break
			}
			last := ps[len(ps)-1]
			after = &store.PositionKey{WalletID: last.WalletID, Asset: last.Asset}
		}
		if len(got) != len(want) {
			t.Fatalf("got %v want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("order: got %v want %v", got, want)
			}
		}
	})
}

func TestWalletsAreScopedToTheirOrganisation(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org, other := mustOrg(t, s), mustOrg(t, s)
		w := mustWallet(t, s, org, "solana")
		mustWallet(t, s, other, "solana")
		if _, err := s.Wallet(ctx, other, w.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("other org reads wallet: %v", err)
		}
		got, err := s.Wallet(ctx, org, w.ID)
		if err != nil || got.ID != w.ID {
			t.Fatalf("own wallet: %v %v", got, err)
		}
		list, err := s.ListWallets(ctx, org, "", 50)
		if err != nil || len(list) != 1 {
			t.Fatalf("list: %v %v", list, err)
		}
		n, err := s.CountWallets(ctx, org)
		if err != nil || n != 1 {
			t.Fatalf("count: %d %v", n, err)
		}
	})
}

// A resource-restricted key's wallet lists, counts, positions and sync time cover its wallets
// only, and never another organisation's even when named.
func TestWalletListsNarrowToTheGivenWallets(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org, other := mustOrg(t, s), mustOrg(t, s)
		mine, rest, theirs := mustWallet(t, s, org, "solana"), mustWallet(t, s, org, "ethereum"), mustWallet(t, s, other, "solana")
		first := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
		for i, w := range []*store.Wallet{mine, rest, theirs} {
			if err := s.ReplaceBalances(ctx, w.ID, map[string]decimal.Decimal{"SOL": dec("1")}, first.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		only := []string{mine.ID, theirs.ID}
		if list, err := s.ListWallets(ctx, org, "", 50, only...); err != nil || len(list) != 1 || list[0].ID != mine.ID {
			t.Fatalf("list: %v %v", list, err)
		}
		if n, err := s.CountWallets(ctx, org, only...); err != nil || n != 1 {
			t.Fatalf("count: %d %v", n, err)
		}
		if ps, err := s.ListPositions(ctx, org, nil, 0, only...); err != nil || len(ps) != 1 || ps[0].WalletID != mine.ID {
			t.Fatalf("positions: %v %v", ps, err)
		}
		if last, err := s.LastWalletSync(ctx, org, only...); err != nil || last == nil || !last.Equal(first) {
			t.Fatalf("last sync: %v %v", last, err)
		}
		if n, err := s.CountWallets(ctx, org); err != nil || n != 2 {
			t.Fatalf("unnarrowed count: %d %v", n, err)
		}
	})
}

func TestChainHoldingsAreExactAndOfTheirChain(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		eth, other, sol := mustWallet(t, s, org, "ethereum"), mustWallet(t, s, org, "ethereum"), mustWallet(t, s, org, "solana")
		held := map[string]decimal.Decimal{"ETH": dec("1000000000000000000000.3"), "USDC": dec("0.000001")}
		for _, w := range []*store.Wallet{eth, sol} {
			if err := s.ReplaceBalances(ctx, w.ID, held, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.ChainHoldings(ctx, "ethereum")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || len(got[eth.Address]) != 2 || got[other.Address] != nil {
			t.Fatalf("holdings %v: want the one synced ethereum wallet", got)
		}
		for asset, want := range held {
			if !got[eth.Address][asset].Equal(want) {
				t.Fatalf("%s: %s, want %s exactly", asset, got[eth.Address][asset], want)
			}
		}
	})
}

func TestPolicyVersionIncreasesAndEachIsKept(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		for want := 1; want <= 3; want++ {
			p := &store.Policy{OrgID: org, App: "pay", Document: `{"v":` + string(rune('0'+want)) + `}`, UpdatedBy: "key_x", UpdatedAt: time.Now()}
			v := &store.PolicyVersion{AuthorPerson: "usr_a"}
			if err := s.PublishPolicy(ctx, p, v); err != nil {
				t.Fatal(err)
			}
			if v.Version != want {
				t.Fatalf("recorded version %d, want %d", v.Version, want)
			}
			got, err := s.Policy(ctx, org, "pay")
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != want || got.Document != p.Document {
				t.Fatalf("version %d doc %s, want %d %s", got.Version, got.Document, want, p.Document)
			}
		}
		if _, err := s.Policy(ctx, org, "trade"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("missing policy: %v", err)
		}
		history, err := s.PolicyVersions(ctx, org, "pay", 0, 10)
		if err != nil || len(history) != 3 || history[0].Version != 3 || history[2].Document != `{"v":1}` || history[1].AuthorPerson != "usr_a" {
			t.Fatalf("history %+v (%v), want versions 3, 2, 1", history, err)
		}
		older, err := s.PolicyVersions(ctx, org, "pay", 2, 10)
		if err != nil || len(older) != 1 || older[0].Version != 1 {
			t.Fatalf("versions below 2: %+v (%v)", older, err)
		}
		if _, err := s.PolicyVersionOf(ctx, org, "pay", 4); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("an unpublished version: %v", err)
		}
	})
}

func TestTxRollsBackOnError(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		id := ids.New(ids.Organization)
		boom := errors.New("boom")
		err := s.Tx(ctx, func(tx *store.Store) error {
			if err := tx.CreateOrganization(ctx, &store.Organization{ID: id, Name: "x", CreatedAt: time.Now()}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("want boom, got %v", err)
		}
		exists, err := s.OrganizationExists(ctx, id)
		if err != nil || exists {
			t.Fatalf("organisation survived a rolled-back tx: %v %v", exists, err)
		}
	})
}

func TestAuditListIsScoped(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org, other := mustOrg(t, s), mustOrg(t, s)
		for _, a := range []struct{ org, app string }{{org, "pay"}, {org, "trade"}, {other, "pay"}, {org, "pay"}} {
			err := s.AppendAudit(ctx, &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: a.org, App: a.app, ActorType: "key",
				ActorID: "key_1", Action: "payment.created", ResourceType: "order", ResourceID: "ord_1",
				CorrelationID: "c", Details: "{}", CreatedAt: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.ListAudit(ctx, org, []string{"pay"}, nil, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID < got[1].ID {
			t.Fatalf("want 2 pay records newest first, got %+v", got)
		}
		for _, a := range got {
			if a.OrgID != org || a.App != "pay" {
				t.Fatalf("leaked record %+v", a)
			}
		}
	})
}

func TestUnavailableTellsOutagesFromFailures(t *testing.T) {
	_, err := store.Open(ctx, store.Config{DatabaseURL: "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"})
	if err == nil || !store.Unavailable(err) {
		t.Fatalf("a refused connection is an outage: %v", err)
	}
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		_, err := s.Wallet(ctx, "org", "wal")
		if !errors.Is(err, store.ErrNotFound) || store.Unavailable(err) {
			t.Fatalf("not found is not an outage: %v", err)
		}
		err = s.CreateOrganization(ctx, &store.Organization{ID: "", Name: "x"})
		err2 := s.CreateOrganization(ctx, &store.Organization{ID: "", Name: "x"})
		if err2 == nil || store.Unavailable(err2) || (err != nil && store.Unavailable(err)) {
			t.Fatalf("a constraint violation is not an outage: %v / %v", err, err2)
		}
	})
}

func TestConcurrentWritersLoseNothing(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		var wg sync.WaitGroup
		versions := make(chan int, 10)
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := &store.Policy{OrgID: org, App: "pay", Document: "{}", UpdatedBy: "k", UpdatedAt: time.Now()}
				if err := s.PublishPolicy(ctx, p, &store.PolicyVersion{}); err != nil {
					t.Error(err)
					return
				}
				versions <- p.Version
			}()
		}
		wg.Wait()
		close(versions)
		seen := map[int]bool{}
		for v := range versions {
			if seen[v] || v < 1 || v > 10 {
				t.Fatalf("policy version %d handed out twice or out of range", v)
			}
			seen[v] = true
		}
		if len(seen) != 10 {
			t.Fatalf("%d policy versions for 10 publishes", len(seen))
		}
	})
}

func TestBalanceSyncNeverMovesBackwards(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		w := mustWallet(t, s, org, "ethereum")
		newer := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
		if err := s.ReplaceBalances(ctx, w.ID, map[string]decimal.Decimal{"ETH": dec("2")}, newer); err != nil {
			t.Fatal(err)
		}
		if err := s.ReplaceBalances(ctx, w.ID, map[string]decimal.Decimal{"ETH": dec("1")}, newer.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		ps, _ := s.ListPositions(ctx, org, nil, 0)
		if len(ps) != 1 || !ps[0].Amount.Equal(dec("2")) || !ps[0].SyncedAt.Equal(newer) {
			t.Fatalf("an older read overwrote a newer one: %+v", ps)
		}
		if err := s.ReplaceBalances(ctx, w.ID, map[string]decimal.Decimal{"ETH": dec("-1")}, newer.Add(time.Minute)); err == nil {
			t.Fatal("a negative balance must be refused")
		}
		if err := s.UpsertPrice(ctx, &store.Price{Asset: "ETH", USDPrice: dec("-1"), UpdatedAt: newer}); err == nil {
			t.Fatal("a negative price must be refused")
		}
	})
}

// Many writers at once on SQLite, taking turns at the writer gate or left to SQLite's busy
// handler (SQLITE_WRITER_GATE=false): every transaction commits, each once.
func TestConcurrentSQLiteWritersWithAndWithoutTheGate(t *testing.T) {
	for _, noGate := range []bool{false, true} {
		t.Run(map[bool]string{false: "gate", true: "busy handler"}[noGate], func(t *testing.T) {
			s, err := store.Open(ctx, store.Config{SQLitePath: filepath.Join(t.TempDir(), "treasury.db"), NoWriterGate: noGate})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Migrate(ctx, nil); err != nil {
				t.Fatal(err)
			}
			org := mustOrg(t, s)
			const writers, each = 12, 10
			var wg sync.WaitGroup
			errs := make(chan error, writers*each)
			for range writers {
				wg.Go(func() {
					for range each {
						errs <- s.Tx(ctx, func(tx *store.Store) error {
							return tx.CreateWallet(ctx, &store.Wallet{ID: ids.New(ids.Wallet), OrgID: org, Chain: "ethereum",
								Address: ids.New("addr"), PublicKey: "pk", CreatedAt: time.Now()})
						})
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if n, err := s.CountWallets(ctx, org); err != nil || n != writers*each {
				t.Fatalf("wallets %d, %v", n, err)
			}
		})
	}
}
