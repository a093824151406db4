package service

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/store"
)

// valuation is the exact (unrounded) USD value of a set of positions.
type valuation struct {
	total   decimal.Decimal
	byChain map[string]decimal.Decimal
	// each is the value of each position, nil when the asset has no fresh price.
	each []*decimal.Decimal
	// priceAt is when each position's price was set by its source, nil when it has none.
	priceAt []*time.Time
	// unpriced are the assets held (more than zero) with no fresh price, in name order.
	unpriced []string
}

// priced values positions at the current prices.
func (s *Service) priced(ctx context.Context, positions []store.Position) (valuation, error) {
	prices, err := s.currentPrices(ctx)
	if err != nil {
		return valuation{}, err
	}
	return value(positions, prices, s.now()), nil
}

// value prices positions exactly; rounding happens only when a figure is displayed, so
// totals are sums of exact values (SPEC 2). An asset without a price, or with a stale one
// at now, adds nothing and is named unpriced (SPEC 3.1a: fail closed).
func value(positions []store.Position, prices map[string]store.Price, now time.Time) valuation {
	v := valuation{byChain: map[string]decimal.Decimal{}, each: make([]*decimal.Decimal, len(positions)),
		priceAt: make([]*time.Time, len(positions))}
	for i, p := range positions {
		price, ok := prices[p.Asset]
		if ok {
			at := price.UpdatedAt
			v.priceAt[i] = &at
		}
		if !ok || price.Stale(now) {
			if !p.Amount.IsZero() && !slices.Contains(v.unpriced, p.Asset) {
				v.unpriced = append(v.unpriced, p.Asset)
			}
			continue
		}
		worth := p.Amount.Mul(price.USDPrice)
		v.each[i] = &worth
		v.total = v.total.Add(worth)
		chain := strings.ToLower(p.Chain)
		v.byChain[chain] = v.byChain[chain].Add(worth)
	}
	sort.Strings(v.unpriced)
	return v
}

// ChainValue is the USD value held on one chain.
type ChainValue struct {
	Chain    string
	USDValue decimal.Decimal
}

// Portfolio is the treasury's value (SPEC 3.1).
type Portfolio struct {
	TotalUSD    decimal.Decimal
	WalletCount int64
	// ChainRollup is by chain name, lowercase, in name order.
	ChainRollup []ChainValue
	// SyncedAt is the last balance sync; nil before the first.
	SyncedAt *time.Time
	// UnpricedAssets are the assets held that the total leaves out: no fresh price.
	UnpricedAssets []string
}

// treasuryRead refuses a caller without read on the treasury app.
func treasuryRead(who Caller) error { return mayDo(who, "treasury", auth.ActionRead) }

// WalletDirectory pages through the organisation's wallets as every app's read sees them
// (SPEC 5): what a payout job needs to name one (id, chain, address, scheme, label), no
// balances, which stay the treasury app's. A key restricted to some wallets lists those.
func (s *Service) WalletDirectory(ctx context.Context, who Caller, pg Page) ([]store.Wallet, string, error) {
	if !slices.ContainsFunc(who.Apps(), func(app string) bool { return who.Can(app, auth.ActionRead) }) {
		return nil, "", refuse(PermissionDenied, "Listing the organisation's wallets needs 'read' on an app.")
	}
	ws, err := s.Store.ListWallets(ctx, who.OrgID, pg.After, pg.Limit+1, who.ResourceIDs...)
	if err != nil {
		return nil, "", err
	}
	ws, next := trim(ws, pg.Limit, func(w *store.Wallet) string { return w.ID })
	return ws, next, nil
}

// Portfolio values the organisation's wallets × balances × prices, or those of its wallets
// a key restricted to some reaches; a valuation at most ValuationMaxAge old may answer.
// The portfolio returned is shared: callers only read it.
func (s *Service) Portfolio(ctx context.Context, who Caller) (*Portfolio, error) {
	if err := treasuryRead(who); err != nil {
		return nil, err
	}
	if p := s.rememberedPortfolio(who); p != nil {
		return p, nil
	}
	at := s.now()
	positions, err := s.Store.ListPositions(ctx, who.OrgID, nil, 0, who.ResourceIDs...)
	if err != nil {
		return nil, err
	}
	v, err := s.priced(ctx, positions)
	if err != nil {
		return nil, err
	}
	out := &Portfolio{TotalUSD: v.total, UnpricedAssets: v.unpriced}
	if out.WalletCount, err = s.Store.CountWallets(ctx, who.OrgID, who.ResourceIDs...); err != nil {
		return nil, err
	}
	if out.SyncedAt, err = s.Store.LastWalletSync(ctx, who.OrgID, who.ResourceIDs...); err != nil {
		return nil, err
	}
	// Every chain holding a position is listed, at zero when none of it has a price.
	for _, pos := range positions {
		if chain := strings.ToLower(pos.Chain); !slices.ContainsFunc(out.ChainRollup, func(cv ChainValue) bool { return cv.Chain == chain }) {
			out.ChainRollup = append(out.ChainRollup, ChainValue{Chain: chain, USDValue: v.byChain[chain]})
		}
	}
	sort.Slice(out.ChainRollup, func(i, j int) bool { return out.ChainRollup[i].Chain < out.ChainRollup[j].Chain })
	s.rememberPortfolio(who, out, at)
	return out, nil
}

// Wallet is a wallet with the USD value of its positions.
type Wallet struct {
	*store.Wallet
	USDValue decimal.Decimal
}

// Wallets pages through the organisation's wallets (a restricted key's own), with their
// USD value.
func (s *Service) Wallets(ctx context.Context, who Caller, pg Page) ([]Wallet, string, error) {
	if err := treasuryRead(who); err != nil {
		return nil, "", err
	}
	ws, err := s.Store.ListWallets(ctx, who.OrgID, pg.After, pg.Limit+1, who.ResourceIDs...)
	if err != nil {
		return nil, "", err
	}
	ws, next := trim(ws, pg.Limit, func(w *store.Wallet) string { return w.ID })
	walletIDs := make([]string, len(ws))
	for i, w := range ws {
		walletIDs[i] = w.ID
	}
	positions, err := s.Store.PositionsOfWallets(ctx, who.OrgID, walletIDs)
	if err != nil {
		return nil, "", err
	}
	v, err := s.priced(ctx, positions)
	if err != nil {
		return nil, "", err
	}
	perWallet := map[string]decimal.Decimal{}
	for i, pos := range positions {
		if v.each[i] != nil {
			perWallet[pos.WalletID] = perWallet[pos.WalletID].Add(*v.each[i])
		}
	}
	out := make([]Wallet, len(ws))
	for i := range ws {
		out[i] = Wallet{Wallet: &ws[i], USDValue: perWallet[ws[i].ID]}
	}
	return out, next, nil
}

// Position is one (wallet, asset) holding with its USD value (nil when the asset has no
// fresh price) and when that price was set (nil when there is none).
type Position struct {
	*store.Position
	USDValue *decimal.Decimal
	PriceAt  *time.Time
}

// positionKeySep cannot occur in a wallet id or an asset symbol.
const positionKeySep = "|"

// Positions pages through the holdings of the organisation's wallets (a restricted key's
// own), by wallet and asset.
func (s *Service) Positions(ctx context.Context, who Caller, pg Page) ([]Position, string, error) {
	if err := treasuryRead(who); err != nil {
		return nil, "", err
	}
	var after *store.PositionKey
	if pg.After != "" {
		w, a, ok := strings.Cut(pg.After, positionKeySep)
		if !ok {
			return nil, "", invalid(field("cursor", "is not a cursor returned by this list"))
		}
		after = &store.PositionKey{WalletID: w, Asset: a}
	}
	ps, err := s.Store.ListPositions(ctx, who.OrgID, after, pg.Limit+1, who.ResourceIDs...)
	if err != nil {
		return nil, "", err
	}
	ps, next := trim(ps, pg.Limit, func(p *store.Position) string { return p.WalletID + positionKeySep + p.Asset })
	v, err := s.priced(ctx, ps)
	if err != nil {
		return nil, "", err
	}
	out := make([]Position, len(ps))
	for i := range ps {
		out[i] = Position{Position: &ps[i], USDValue: v.each[i], PriceAt: v.priceAt[i]}
	}
	return out, next, nil
}
