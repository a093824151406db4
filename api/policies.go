package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/ids"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/policy"
	"github.com/opentreasury/treasury/store"
)

type policyHandlers struct {
	store *store.Store
	log   *slog.Logger
	now   func() time.Time
}

type policyResponse struct {
	App       string          `json:"app"`
	Version   int             `json:"version"`
	Rules     json.RawMessage `json:"rules"`
	UpdatedBy string          `json:"updatedBy"`
	UpdatedAt string          `json:"updatedAt"`
}

// policyApp resolves {app} and checks that the caller holds one of the actions on it.
func policyApp(c *gin.Context, actions ...string) (string, bool) {
	app := c.Param("app")
	if !auth.IsApp(app) {
		fail(c, CodeNotFound, "There is no app named "+app+".")
		return "", false
	}
	p := principalOf(c)
	for _, a := range actions {
		if p.Can(app, a) {
			c.Set(principalContextKey, p.InApp(app))
			return app, true
		}
	}
	fail(c, CodePermissionDenied, "This credential may not do this on the '"+app+"' app.")
	return "", false
}

func policyJSON(p *store.Policy) policyResponse {
	return policyResponse{App: p.App, Version: p.Version, Rules: json.RawMessage(p.Document),
		UpdatedBy: p.UpdatedBy, UpdatedAt: formatTime(p.UpdatedAt)}
}

// get answers GET /policies/{app} (Developer).
func (h *policyHandlers) get(c *gin.Context) {
	app, ok := policyApp(c, auth.ActionDeveloper)
	if !ok {
		return
	}
	p, err := h.store.Policy(c.Request.Context(), principalOf(c).OrgID, app)
	if errors.Is(err, store.ErrNotFound) {
		c.JSON(http.StatusOK, policyResponse{App: app, Version: 0, Rules: json.RawMessage(`{}`)})
		return
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	c.JSON(http.StatusOK, policyJSON(p))
}

// put answers PUT /policies/{app} (Developer): the new rules apply to orders submitted
// from now on.
func (h *policyHandlers) put(c *gin.Context) {
	app, ok := policyApp(c, auth.ActionDeveloper)
	if !ok {
		return
	}
	body, ok := readBody(c)
	if !ok {
		return
	}
	rules, err := policy.Parse(body)
	if err != nil {
		validationFailed(c, []orders.FieldError{{Field: "body", Message: err.Error()}})
		return
	}
	doc, err := rules.Document()
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	pr := principalOf(c)
	now := h.now().UTC()
	stored := &store.Policy{OrgID: pr.OrgID, App: app, Document: doc, UpdatedBy: pr.ID, UpdatedAt: now}
	err = h.store.Tx(c.Request.Context(), func(tx *store.Store) error {
		if err := tx.PutPolicy(c.Request.Context(), stored); err != nil {
			return err
		}
		return tx.AppendAudit(c.Request.Context(), &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: pr.OrgID, App: app,
			ActorType: pr.ActorType(), ActorID: pr.ID, Action: "policy.updated", ResourceType: "policy", ResourceID: app,
			CorrelationID: correlationID(c), Details: doc, CreatedAt: now})
	})
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	c.JSON(http.StatusOK, policyJSON(stored))
}

type evaluationResponse struct {
	App              string         `json:"app"`
	PolicyVersion    int            `json:"policyVersion"`
	Allowed          bool           `json:"allowed"`
	Violations       []policy.Check `json:"violations"`
	Checks           []policy.Check `json:"checks"`
	ApprovalRequired bool           `json:"approvalRequired"`
	Quorum           int            `json:"quorum"`
	AmountUSD        string         `json:"amountUsd"`
	DailyVolumeUSD   string         `json:"dailyVolumeUsd"`
}

// evaluate answers POST /policies/{app}/evaluate: the dry run of an order body of the
// app's domain against the current policy. It changes nothing.
func (h *policyHandlers) evaluate(c *gin.Context) {
	app, ok := policyApp(c, auth.ActionWrite, auth.ActionDeveloper)
	if !ok {
		return
	}
	domain := ""
	for _, d := range orders.Domains {
		if d.App == app {
			domain = d.Name
		}
	}
	if domain == "" {
		fail(c, CodeNotFound, "The "+app+" app has no orders to evaluate.")
		return
	}
	v, ok := readOrder(c, h.store, h.log, domain)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	pr := principalOf(c)
	rules := policy.Rules{}
	version := 0
	if p, err := h.store.Policy(ctx, pr.OrgID, app); err == nil {
		if rules, err = policy.Parse([]byte(p.Document)); err != nil {
			requestFailed(c, h.log, err)
			return
		}
		version = p.Version
	} else if !errors.Is(err, store.ErrNotFound) {
		requestFailed(c, h.log, err)
		return
	}
	now := h.now().UTC()
	dayStart := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	spent, err := h.store.WalletVolumeSince(ctx, v.wallet.ID, dayStart, "")
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	e := rules.Evaluate(v.in.PolicyOrder(v.amountUSD), spent)
	violations := e.Violations()
	if violations == nil {
		violations = []policy.Check{}
	}
	if e.Checks == nil {
		e.Checks = []policy.Check{}
	}
	c.JSON(http.StatusOK, evaluationResponse{App: app, PolicyVersion: version, Allowed: e.Allowed(),
		Violations: violations, Checks: e.Checks, ApprovalRequired: e.ApprovalRequired, Quorum: e.Quorum,
		AmountUSD: usd(v.amountUSD), DailyVolumeUSD: usd(spent)})
}
