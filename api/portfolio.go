package api

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/service"
)

type portfolioHandlers struct {
	svc *service.Service
	log *slog.Logger
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

// portfolio answers GET /treasury/portfolio: wallets × balances × prices of the caller's org,
// or of its wallets for a key restricted to some.
func (h *portfolioHandlers) portfolio(c *gin.Context) {
	p, err := h.svc.Portfolio(c.Request.Context(), caller(c))
	if err != nil {
		failed(c, h.log, err)
		return
	}
	rollup := make([]chainValue, len(p.ChainRollup))
	for i, cv := range p.ChainRollup {
		rollup[i] = chainValue{Chain: cv.Chain, USDValue: usd(cv.USDValue)}
	}
	c.JSON(http.StatusOK, portfolioResponse{TotalUSD: usd(p.TotalUSD), WalletCount: p.WalletCount, ChainRollup: rollup,
		SyncedAt: formatTimePtr(p.SyncedAt)})
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

func walletJSON(w *service.Wallet) walletResponse {
	return walletResponse{ID: w.ID, Chain: w.Chain, Address: w.Address, Label: w.Label, AutoSign: w.AutoSign,
		PublicKey: w.PublicKey, USDValue: usd(w.USDValue), SyncedAt: formatTimePtr(w.SyncedAt), CreatedAt: formatTime(w.CreatedAt)}
}

// wallets answers GET /treasury/wallets, a page of the org's wallets (a restricted key's
// own) with their USD value.
func (h *portfolioHandlers) wallets(c *gin.Context) {
	listPage(c, h.log, h.svc.Wallets, walletJSON)
}

type positionResponse struct {
	WalletID string  `json:"walletId"`
	Chain    string  `json:"chain"`
	Asset    string  `json:"asset"`
	Amount   string  `json:"amount"`
	USDValue *string `json:"usdValue"`
	SyncedAt string  `json:"syncedAt"`
}

func positionJSON(p *service.Position) positionResponse {
	var worth *string
	if p.USDValue != nil {
		s := usd(*p.USDValue)
		worth = &s
	}
	return positionResponse{WalletID: p.WalletID, Chain: p.Chain, Asset: p.Asset, Amount: p.Amount.String(),
		USDValue: worth, SyncedAt: formatTime(p.SyncedAt)}
}

// positions answers GET /treasury/positions, a page of (wallet, asset) holdings of the org's
// wallets (a restricted key's own).
func (h *portfolioHandlers) positions(c *gin.Context) {
	listPage(c, h.log, h.svc.Positions, positionJSON)
}
