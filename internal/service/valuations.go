package service

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/opentreasury/treasury/internal/store"
)

// valuations remembers, for at most Service.ValuationMaxAge, the prices and each
// organisation's portfolio (per reach: a key restricted to some wallets has a portfolio of
// its own), so that a dashboard polling the portfolio costs one valuation per interval
// instead of one per request. Balances change only when the balance sync reads the
// chains (every BALANCE_SYNC_INTERVAL) and prices when they are set, so a bound of a
// second or two adds little to how old a balance already is. The zero value is ready.
type valuations struct {
	mu         sync.Mutex
	prices     map[string]store.Price
	pricesAt   time.Time
	portfolios map[string]portfolioAt
}

type portfolioAt struct {
	p  *Portfolio
	at time.Time
}

// portfolioLimit bounds the portfolios remembered; past it the cache starts afresh.
const portfolioLimit = 10000

func reachKey(who Caller) string {
	return who.OrgID + "\x00" + strings.Join(who.ResourceIDs, ",")
}

// fresh: a value computed at at may still be served at now.
func (s *Service) fresh(at, now time.Time) bool {
	return s.ValuationMaxAge > 0 && !at.IsZero() && now.Sub(at) < s.ValuationMaxAge
}

// currentPrices are the kept USD prices by asset, read at most ValuationMaxAge ago; each
// says itself when it goes stale. The map is shared: callers only read it.
func (s *Service) currentPrices(ctx context.Context) (map[string]store.Price, error) {
	now := s.now()
	v := &s.valuations
	v.mu.Lock()
	if s.fresh(v.pricesAt, now) {
		prices := v.prices
		v.mu.Unlock()
		return prices, nil
	}
	v.mu.Unlock()
	prices, err := s.Store.Prices(ctx)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	if now.After(v.pricesAt) {
		v.prices, v.pricesAt = prices, now
	}
	v.mu.Unlock()
	return prices, nil
}

// rememberedPortfolio is the caller's reach's portfolio when one computed within the max
// age is kept.
func (s *Service) rememberedPortfolio(who Caller) *Portfolio {
	v := &s.valuations
	v.mu.Lock()
	defer v.mu.Unlock()
	if e, ok := v.portfolios[reachKey(who)]; ok && s.fresh(e.at, s.now()) {
		return e.p
	}
	return nil
}

func (s *Service) rememberPortfolio(who Caller, p *Portfolio, at time.Time) {
	if s.ValuationMaxAge <= 0 {
		return
	}
	v := &s.valuations
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.portfolios == nil || len(v.portfolios) >= portfolioLimit {
		v.portfolios = map[string]portfolioAt{}
	}
	if e, ok := v.portfolios[reachKey(who)]; !ok || at.After(e.at) {
		v.portfolios[reachKey(who)] = portfolioAt{p: p, at: at}
	}
}
