package api

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
)

// valuation is the exact (unrounded) USD value of a set of positions.
type valuation struct {
	total   decimal.Decimal
	byChain map[string]decimal.Decimal
	// each is the value of each position, nil when the asset has no price.
	each []*decimal.Decimal
}

// value prices positions exactly; rounding happens only when a figure is displayed, so
// totals are sums of exact values (SPEC section 2). An asset without a price adds nothing.
func value(positions []store.Position, prices map[string]decimal.Decimal) valuation {
	v := valuation{byChain: map[string]decimal.Decimal{}, each: make([]*decimal.Decimal, len(positions))}
	for i, p := range positions {
		price, ok := prices[p.Asset]
		if !ok {
			continue
		}
		worth := p.Amount.Mul(price)
		v.each[i] = &worth
		v.total = v.total.Add(worth)
		chain := strings.ToLower(p.Chain)
		v.byChain[chain] = v.byChain[chain].Add(worth)
	}
	return v
}

type chainValue struct {
	Chain    string `json:"chain"`
	USDValue string `json:"usdValue"`
}

type portfolioResponse struct {
	TotalUSD    string       `json:"totalUsd"`
	WalletCount int64        `json:"walletCount"`
	ChainRollup []chainValue `json:"chainRollup"`
	SyncedAt    *string      `json:"syncedAt"`
}

type portfolioHandlers struct {
	store *store.Store
	log   *slog.Logger
}

// priced values positions at the current prices.
func (h *portfolioHandlers) priced(ctx context.Context, positions []store.Position) (valuation, error) {
	prices, err := h.store.Prices(ctx)
	if err != nil {
		return valuation{}, err
	}
	return value(positions, prices), nil
}

// portfolio answers GET /treasury/portfolio: wallets × balances × prices of the caller's org,
// or of its wallets for a key restricted to some.
func (h *portfolioHandlers) portfolio(c *gin.Context) {
	var errs []orders.FieldError
	rejectUnknownQuery(c, nil, &errs)
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	ctx := c.Request.Context()
	p := principalOf(c)
	positions, err := h.store.ListPositions(ctx, p.OrgID, nil, 0, p.ResourceIDs...)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	v, err := h.priced(ctx, positions)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	count, err := h.store.CountWallets(ctx, p.OrgID, p.ResourceIDs...)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	synced, err := h.store.LastWalletSync(ctx, p.OrgID, p.ResourceIDs...)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	chains := make([]string, 0, len(v.byChain))
	for _, pos := range positions {
		if _, seen := v.byChain[strings.ToLower(pos.Chain)]; !seen {
			v.byChain[strings.ToLower(pos.Chain)] = decimal.Zero
		}
	}
	for ch := range v.byChain {
		chains = append(chains, ch)
	}
	sort.Strings(chains)
	rollup := make([]chainValue, 0, len(chains))
	for _, ch := range chains {
		rollup = append(rollup, chainValue{Chain: ch, USDValue: usd(v.byChain[ch])})
	}
	c.JSON(http.StatusOK, portfolioResponse{
		TotalUSD:    usd(v.total),
		WalletCount: count,
		ChainRollup: rollup,
		SyncedAt:    formatTimePtr(synced),
	})
}

type walletResponse struct {
	ID        string  `json:"id"`
	Chain     string  `json:"chain"`
	Address   string  `json:"address"`
	Label     string  `json:"label"`
	AutoSign  bool    `json:"autoSign"`
	PublicKey string  `json:"publicKey"`
	USDValue  string  `json:"usdValue"`
	SyncedAt  *string `json:"syncedAt"`
	CreatedAt string  `json:"createdAt"`
}

// wallets answers GET /treasury/wallets, a page of the org's wallets (a restricted key's
// own) with their USD value.
func (h *portfolioHandlers) wallets(c *gin.Context) {
	pg, errs := listParams(c, "limit", "cursor")
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	ctx := c.Request.Context()
	p := principalOf(c)
	ws, err := h.store.ListWallets(ctx, p.OrgID, pg.After, pg.Limit+1, p.ResourceIDs...)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	ws, more := trimPage(ws, pg.Limit)
	walletIDs := make([]string, len(ws))
	for i, w := range ws {
		walletIDs[i] = w.ID
	}
	positions, err := h.store.PositionsOfWallets(ctx, p.OrgID, walletIDs)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	v, err := h.priced(ctx, positions)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	perWallet := map[string]decimal.Decimal{}
	for i, pos := range positions {
		if v.each[i] != nil {
			perWallet[pos.WalletID] = perWallet[pos.WalletID].Add(*v.each[i])
		}
	}
	out := make([]walletResponse, len(ws))
	for i, w := range ws {
		out[i] = walletResponse{
			ID: w.ID, Chain: w.Chain, Address: w.Address, Label: w.Label, AutoSign: w.AutoSign,
			PublicKey: w.PublicKey, USDValue: usd(perWallet[w.ID]),
			SyncedAt: formatTimePtr(w.SyncedAt), CreatedAt: formatTime(w.CreatedAt),
		}
	}
	var cursor *string
	if more {
		cursor = encodeCursor(ws[len(ws)-1].ID)
	}
	c.JSON(http.StatusOK, listResponse[walletResponse]{Data: out, NextCursor: cursor})
}

type positionResponse struct {
	WalletID string  `json:"walletId"`
	Chain    string  `json:"chain"`
	Asset    string  `json:"asset"`
	Amount   string  `json:"amount"`
	USDValue *string `json:"usdValue"`
	SyncedAt string  `json:"syncedAt"`
}

// positionCursorSep cannot occur in a wallet id or an asset symbol.
const positionCursorSep = "|"

// positions answers GET /treasury/positions, a page of (wallet, asset) holdings of the org's
// wallets (a restricted key's own).
func (h *portfolioHandlers) positions(c *gin.Context) {
	pg, errs := listParams(c, "limit", "cursor")
	var after *store.PositionKey
	if pg.After != "" {
		w, a, ok := strings.Cut(pg.After, positionCursorSep)
		if !ok {
			errs = append(errs, orders.FieldError{Field: "cursor", Message: "is not a cursor returned by this list"})
		}
		after = &store.PositionKey{WalletID: w, Asset: a}
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	ctx := c.Request.Context()
	p := principalOf(c)
	ps, err := h.store.ListPositions(ctx, p.OrgID, after, pg.Limit+1, p.ResourceIDs...)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	ps, more := trimPage(ps, pg.Limit)
	v, err := h.priced(ctx, ps)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	out := make([]positionResponse, len(ps))
	for i, pos := range ps {
		var worth *string
		if v.each[i] != nil {
			s := usd(*v.each[i])
			worth = &s
		}
		out[i] = positionResponse{WalletID: pos.WalletID, Chain: pos.Chain, Asset: pos.Asset,
			Amount: pos.Amount.String(), USDValue: worth, SyncedAt: formatTime(pos.SyncedAt)}
	}
	var cursor *string
	if more {
		lp := ps[len(ps)-1]
		cursor = encodeCursor(lp.WalletID + positionCursorSep + lp.Asset)
	}
	c.JSON(http.StatusOK, listResponse[positionResponse]{Data: out, NextCursor: cursor})
}
