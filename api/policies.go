package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/policy"
	"github.com/opentreasury/treasury/service"
	"github.com/opentreasury/treasury/store"
)

type policyHandlers struct {
	svc *service.Service
	log *slog.Logger
}

type policyResponse struct {
	App     string          `json:"app"`
	Version int             `json:"version"`
	Rules   json.RawMessage `json:"rules"`
	// UpdatedBy and UpdatedAt are null until the first PUT.
	UpdatedBy *string `json:"updatedBy"`
	UpdatedAt *string `json:"updatedAt"`
}

func policyJSON(p *store.Policy) policyResponse {
	out := policyResponse{App: p.App, Version: p.Version, Rules: json.RawMessage(p.Document)}
	if p.Version > 0 {
		at := formatTime(p.UpdatedAt)
		out.UpdatedBy, out.UpdatedAt = &p.UpdatedBy, &at
	}
	return out
}

// get answers GET /policies/{app} (Developer).
func (h *policyHandlers) get(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	respond(c, h.log, http.StatusOK, policyJSON)(h.svc.Policy(c.Request.Context(), caller(c), c.Param("app")))
}

// narrowToPathApp makes a person who holds one of actions on the path's app act within
// it, as the request log files the request.
func narrowToPathApp(c *gin.Context, actions ...string) {
	app := c.Param("app")
	if p := principalOf(c); slices.ContainsFunc(actions, func(a string) bool { return p.Can(app, a) }) {
		narrow(c, app)
	}
}

// put answers PUT /policies/{app} (Developer): the new rules apply to orders submitted
// from now on.
func (h *policyHandlers) put(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	body, ok := readBody(c)
	if !ok {
		return
	}
	respond(c, h.log, http.StatusOK, policyJSON)(h.svc.PutPolicy(c.Request.Context(), caller(c), c.Param("app"), body))
}

// evaluate answers POST /policies/{app}/evaluate: the dry run of an order body of the
// app's domain against the current policy. It changes nothing.
func (h *policyHandlers) evaluate(c *gin.Context) {
	narrowToPathApp(c, auth.ActionWrite, auth.ActionDeveloper)
	body, ok := readBody(c)
	if !ok {
		return
	}
	e, err := h.svc.EvaluatePolicy(c.Request.Context(), caller(c), c.Param("app"), body)
	if err != nil {
		failed(c, h.log, err)
		return
	}
	violations := e.Violations()
	if violations == nil {
		violations = []policy.Check{}
	}
	checks := e.Checks
	if checks == nil {
		checks = []policy.Check{}
	}
	c.JSON(http.StatusOK, apitypes.PolicyEvaluation{App: c.Param("app"), PolicyVersion: e.PolicyVersion, Allowed: e.Allowed(),
		Violations: violations, Checks: checks, ApprovalRequired: e.ApprovalRequired, Quorum: e.Quorum,
		AmountUSD: usd(e.AmountUSD), DailyVolumeUSD: usd(e.DailyVolumeUSD)})
}
