package store_test

import (
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
)

// A price reading is kept only when it is no older than the kept one: a slow or retried
// read never moves a price back; its source, round and staleness come back as written.
func TestPriceReadingsNeverMoveBackAndKeepTheirStaleness(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
		stale := at.Add(2 * time.Hour)
		read := at.Add(time.Second)
		kept, err := s.RecordPrice(ctx, &store.Price{Asset: "ETH", USDPrice: dec("3000.12345678"), UpdatedAt: at,
			Source: "feed:ethereum:0xabc", Round: "18446744073709551617", ReadAt: &read, StaleAfter: &stale})
		if err != nil || !kept {
			t.Fatalf("first reading kept %v, %v", kept, err)
		}
		kept, err = s.RecordPrice(ctx, &store.Price{Asset: "ETH", USDPrice: dec("1"), UpdatedAt: at.Add(-time.Minute), Source: "feed:ethereum:0xabc"})
		if err != nil || kept {
			t.Fatalf("an older reading was kept (%v, %v)", kept, err)
		}
		if _, err := s.RecordPrice(ctx, &store.Price{Asset: "ETH", USDPrice: dec("0"), UpdatedAt: at.Add(time.Hour)}); err == nil {
			t.Fatal("a zero price must be refused")
		}
		got, err := s.Prices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := got["ETH"]
		if !p.USDPrice.Equal(dec("3000.12345678")) || !p.UpdatedAt.Equal(at) || p.Round != "18446744073709551617" ||
			p.Source != "feed:ethereum:0xabc" || p.StaleAfter == nil || !p.StaleAfter.Equal(stale) || p.ReadAt == nil {
			t.Fatalf("kept %+v", p)
		}
		if p.Stale(stale.Add(-time.Second)) || !p.Stale(stale) {
			t.Fatalf("stale before %s: %v; at it: %v", stale, p.Stale(stale.Add(-time.Second)), p.Stale(stale))
		}
		// A newer reading of a fixed price replaces it and is never stale.
		kept, err = s.RecordPrice(ctx, &store.Price{Asset: "ETH", USDPrice: dec("2999"), UpdatedAt: at.Add(time.Minute), Source: "fixed"})
		if err != nil || !kept {
			t.Fatalf("newer reading kept %v, %v", kept, err)
		}
		got, _ = s.Prices(ctx)
		if p := got["ETH"]; !p.USDPrice.Equal(dec("2999")) || p.StaleAfter != nil || p.Stale(at.Add(1000*time.Hour)) {
			t.Fatalf("after the fixed reading: %+v", p)
		}
	})
}

// Prices of assets no source names any more are deleted; the named ones stay.
func TestPricesOfUnnamedAssetsAreDeleted(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
		for _, a := range []string{"ETH", "USDC", "OLD"} {
			if _, err := s.RecordPrice(ctx, &store.Price{Asset: a, USDPrice: dec("1"), UpdatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		n, err := s.DeletePricesExcept(ctx, []string{"ETH", "USDC"})
		if err != nil || n != 1 {
			t.Fatalf("deleted %d, %v; want 1", n, err)
		}
		got, _ := s.Prices(ctx)
		if _, ok := got["OLD"]; ok || len(got) != 2 {
			t.Fatalf("left %v", got)
		}
	})
}
