package api

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

type portfolioHandlers struct {
	svc *service.Service
	log *slog.Logger
}

// portfolio answers GET /treasury/portfolio: wallets × balances × prices of the caller's org,
// or of its wallets for a key restricted to some.
func (h *portfolioHandlers) portfolio(c *gin.Context) {
	p, err := h.svc.Portfolio(c.Request.Context(), caller(c))
	if err != nil {
		failed(c, h.log, err)
		return
	}
	rollup := make([]apitypes.ChainValue, len(p.ChainRollup))
	for i, cv := range p.ChainRollup {
		rollup[i] = apitypes.ChainValue{Chain: cv.Chain, USDValue: usd(cv.USDValue)}
	}
	c.PureJSON(http.StatusOK, apitypes.Portfolio{TotalUSD: usd(p.TotalUSD), WalletCount: int(p.WalletCount), ChainRollup: rollup,
		SyncedAt: timeOrNull(p.SyncedAt), UnpricedAssets: append([]string{}, p.UnpricedAssets...)})
}

func walletJSON(w *service.Wallet) apitypes.Wallet {
	return apitypes.Wallet{ID: w.ID, Chain: w.Chain, Address: w.Address, Label: w.Label, AutoSign: w.AutoSign,
		PublicKey: w.PublicKey, Scheme: w.Scheme, USDValue: usd(w.USDValue), SyncedAt: timeOrNull(w.SyncedAt), CreatedAt: timeOf(w.CreatedAt),
		ArchivedAt: timeOrNull(w.ArchivedAt)}
}

func challengeJSON(ch *store.WalletChallenge) apitypes.WalletChallenge {
	return apitypes.WalletChallenge{ChallengeID: ch.ID, Chain: ch.Chain, Address: ch.Address, Message: ch.Message,
		ExpiresAt: timeOf(ch.ExpiresAt)}
}

// challenge answers POST /treasury/wallets/challenges {chain, address|publicKey}: the
// message the wallet's key must sign to register it, good for five minutes.
func (h *portfolioHandlers) challenge(c *gin.Context) {
	var req struct{ Chain, Address, PublicKey string }
	if !bindStrict(c, &req, "chain", "address", "publicKey") {
		return
	}
	respond(c, h.log, http.StatusCreated, challengeJSON)(h.svc.WalletChallenge(c.Request.Context(), caller(c), req.Chain, req.Address, req.PublicKey))
}

// register answers POST /treasury/wallets {chain, address|publicKey, label, challengeId,
// signature}: the wallet, once its key's signature of the challenge verifies.
func (h *portfolioHandlers) register(c *gin.Context) {
	var req struct{ Chain, Address, PublicKey, Label, ChallengeID, Signature string }
	if !bindStrict(c, &req, "chain", "address", "publicKey", "label", "challengeId", "signature") {
		return
	}
	respond(c, h.log, http.StatusCreated, walletJSON)(h.svc.RegisterWallet(c.Request.Context(), caller(c), service.WalletProof{
		Chain: req.Chain, Address: req.Address, PublicKey: req.PublicKey, Label: req.Label, ChallengeID: req.ChallengeID, Signature: req.Signature}))
}

// relabel answers PATCH /treasury/wallets/{id} {label}.
func (h *portfolioHandlers) relabel(c *gin.Context) {
	var req struct{ Label string }
	if !bindStrict(c, &req, "label") {
		return
	}
	respond(c, h.log, http.StatusOK, walletJSON)(h.svc.RelabelWallet(c.Request.Context(), caller(c), c.Param("id"), req.Label))
}

// archive answers POST /treasury/wallets/{id}/archive: no new orders from the wallet.
func (h *portfolioHandlers) archive(c *gin.Context) {
	respond(c, h.log, http.StatusOK, walletJSON)(h.svc.ArchiveWallet(c.Request.Context(), caller(c), c.Param("id")))
}

func walletRefJSON(w *store.Wallet) apitypes.WalletRef {
	return apitypes.WalletRef{ID: w.ID, Chain: w.Chain, Address: w.Address, Scheme: w.Scheme, Label: w.Label}
}

// walletDirectory answers GET /wallets: the organisation's wallets (a restricted key's
// own), for any app's read.
func (h *portfolioHandlers) walletDirectory(c *gin.Context) {
	listPage(c, h.log, h.svc.WalletDirectory, walletRefJSON)
}

// wallets answers GET /treasury/wallets, a page of the org's wallets (a restricted key's
// own) with their USD value.
func (h *portfolioHandlers) wallets(c *gin.Context) {
	listPage(c, h.log, h.svc.Wallets, walletJSON)
}

func positionJSON(p *service.Position) apitypes.Position {
	var worth *string
	if p.USDValue != nil {
		s := usd(*p.USDValue)
		worth = &s
	}
	return apitypes.Position{WalletID: p.WalletID, Chain: p.Chain, Asset: p.Asset, Amount: p.Amount.String(),
		USDValue: worth, PriceAt: timeOrNull(p.PriceAt), SyncedAt: timeOf(p.SyncedAt)}
}

// positions answers GET /treasury/positions, a page of (wallet, asset) holdings of the org's
// wallets (a restricted key's own).
func (h *portfolioHandlers) positions(c *gin.Context) {
	listPage(c, h.log, h.svc.Positions, positionJSON)
}
