package console

import (
	"net/http"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// The treasury's wallets: each with its balances, and the two steps of registering one
// (the challenge shown to sign, then the signature taken).
func (c *console) walletRoutes() []route {
	return []route{
		{"GET /console/{app}/wallets", "wallets", c.wallets},
		{"POST /console/{app}/wallets/challenge", "wallets", c.walletChallenge},
		{"POST /console/{app}/wallets", "wallets", c.registerWallet},
		{"POST /console/{app}/wallets/{id}/label", "wallets", c.relabelWallet},
		{"POST /console/{app}/wallets/{id}/archive", "wallets", c.archiveWallet},
	}
}

type walletsPage struct {
	Wallets   []service.Wallet
	Positions map[string][]service.Position
	CanEdit   bool
	// Challenge is the message to sign, between the two steps.
	Challenge *store.WalletChallenge
	Label     string
}

func (c *console) walletsData(r *http.Request, rq *request) (walletsPage, error) {
	who := rq.caller(r)
	page := walletsPage{Positions: map[string][]service.Position{}, CanEdit: who.Can("treasury", auth.ActionDeveloper)}
	var err error
	if page.Wallets, _, err = c.Service.Wallets(r.Context(), who, service.Page{Limit: 200}); err != nil {
		return page, err
	}
	positions, _, err := c.Service.Positions(r.Context(), who, service.Page{Limit: 200})
	for _, p := range positions {
		page.Positions[p.WalletID] = append(page.Positions[p.WalletID], p)
	}
	return page, err
}

func (c *console) wallets(w http.ResponseWriter, r *http.Request, rq *request) {
	c.show(w, r, rq, "Wallets", "wallets", func() (any, error) { return c.walletsData(r, rq) })
}

// walletChallenge is the first step: the message the wallet's key must sign.
func (c *console) walletChallenge(w http.ResponseWriter, r *http.Request, rq *request) {
	ch, err := c.Service.WalletChallenge(r.Context(), rq.caller(r), r.PostFormValue("chain"), r.PostFormValue("address"), "")
	if err != nil {
		c.back(w, r, "/console/"+rq.app+"/wallets", err, "")
		return
	}
	page, err := c.walletsData(r, rq)
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	page.Challenge, page.Label = ch, r.PostFormValue("label")
	rq.v.Title = "Sign to register the wallet"
	c.render(w, r, rq, http.StatusCreated, "wallets", page)
}

// registerWallet is the second step: the signature, checked against the challenge.
func (c *console) registerWallet(w http.ResponseWriter, r *http.Request, rq *request) {
	wal, err := c.Service.RegisterWallet(r.Context(), rq.caller(r), service.WalletProof{Chain: r.PostFormValue("chain"),
		Address: r.PostFormValue("address"), Label: r.PostFormValue("label"), ChallengeID: r.PostFormValue("challengeId"),
		Signature: r.PostFormValue("signature")})
	c.after(w, r, "/console/"+rq.app+"/wallets", err, func() string {
		return "Wallet " + wal.ID + " registered; its balances are being read from the chain."
	})
}

func (c *console) relabelWallet(w http.ResponseWriter, r *http.Request, rq *request) {
	wal, err := c.Service.RelabelWallet(r.Context(), rq.caller(r), r.PathValue("id"), r.PostFormValue("label"))
	c.after(w, r, "/console/"+rq.app+"/wallets", err, func() string { return "Wallet " + wal.ID + " is now " + wal.Label + "." })
}

func (c *console) archiveWallet(w http.ResponseWriter, r *http.Request, rq *request) {
	wal, err := c.Service.ArchiveWallet(r.Context(), rq.caller(r), r.PathValue("id"))
	c.after(w, r, "/console/"+rq.app+"/wallets", err, func() string {
		return "Wallet " + wal.ID + " archived: it takes no new orders; its history stays."
	})
}
