package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

type policyHandlers struct {
	svc *service.Service
	log *slog.Logger
}

func policyJSON(p *store.Policy) apitypes.Policy {
	out := apitypes.Policy{App: p.App, Version: p.Version, Rules: rulesJSON(p.Document)}
	if p.Version > 0 {
		at := timeOf(p.UpdatedAt)
		out.UpdatedBy, out.UpdatedAt = &p.UpdatedBy, &at
	}
	return out
}

// rulesJSON is a stored policy document as the wire writes it.
func rulesJSON(document string) apitypes.PolicyRules {
	var rules apitypes.PolicyRules
	_ = json.Unmarshal([]byte(document), &rules) // written by the service from policy.Rules, whose JSON it shares
	return rules
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

// evaluate answers POST /policies/{app}/evaluate[?version=|?draft=]: the dry run of an
// order body of the app's domain against the policy in force, a published version or a
// draft. It changes nothing.
func (h *policyHandlers) evaluate(c *gin.Context) {
	narrowToPathApp(c, auth.ActionWrite, auth.ActionDeveloper)
	version := 0
	if raw, ok := c.GetQuery("version"); ok {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			validationFailed(c, []orders.FieldError{{Field: "version", Message: "must be a published version number"}})
			return
		}
		version = n
	}
	draft := c.Query("draft")
	if version > 0 && draft != "" {
		validationFailed(c, []orders.FieldError{{Field: "draft", Message: "give a version or a draft, not both"}})
		return
	}
	body, ok := readBody(c)
	if !ok {
		return
	}
	e, err := h.svc.EvaluatePolicy(c.Request.Context(), caller(c), c.Param("app"), body, version, draft)
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
	c.PureJSON(http.StatusOK, apitypes.PolicyEvaluation{App: c.Param("app"), PolicyVersion: e.PolicyVersion, DraftID: nullable(e.DraftID),
		Allowed: e.Allowed(), Violations: violations, Checks: checks, ApprovalRequired: e.ApprovalRequired, Quorum: e.Quorum,
		AmountUSD: usd(e.AmountUSD), DailyVolumeUsedUSD: usd(e.DailyVolumeUsedUSD), Windows: windowsJSON(e.Windows)})
}

// windowsJSON renders volume windows' use; amounts to the cent, as every USD figure.
func windowsJSON(ws []policy.WindowUse) []apitypes.PolicyWindowUse {
	out := make([]apitypes.PolicyWindowUse, len(ws))
	for i, w := range ws {
		out[i] = apitypes.PolicyWindowUse{Scope: w.Scope, Key: w.Key, Hours: w.Hours, LimitUSD: w.LimitUSD.String(),
			UsedUSD: usd(w.UsedUSD), RemainingUSD: usd(w.RemainingUSD)}
	}
	return out
}

func approvalsJSON(raw string) []apitypes.PolicyApproval {
	var as []service.DraftApproval
	_ = json.Unmarshal([]byte(raw), &as) // written by the service from this type
	out := make([]apitypes.PolicyApproval, len(as))
	for i, a := range as {
		out[i] = apitypes.PolicyApproval{By: a.By, At: timeOf(a.At)}
	}
	return out
}

func policyVersionJSON(v *store.PolicyVersion) apitypes.PolicyVersion {
	return apitypes.PolicyVersion{App: v.App, Version: v.Version, Rules: rulesJSON(v.Document), Author: v.Author,
		AuthorPerson: nullable(v.AuthorPerson), DraftID: v.DraftID, Approvals: approvalsJSON(v.Approvals), Restores: v.Restores,
		PublishedAt: timeOf(v.PublishedAt)}
}

func policyVersionDiffJSON(v *service.PolicyVersionDiff) apitypes.PolicyVersion {
	out := policyVersionJSON(&v.PolicyVersion)
	out.Diff = v.Diff
	return out
}

func policyDraftJSON(d *service.PolicyDraftView) apitypes.PolicyDraft {
	return apitypes.PolicyDraft{ID: d.ID, App: d.App, Status: d.Status, Rules: rulesJSON(d.Document), BaseVersion: d.BaseVersion,
		InForceVersion: d.InForceVersion, Restores: d.Restores, Author: d.Author, AuthorPerson: nullable(d.AuthorPerson), Creator: creatorJSON(d.Creator),
		Approvals: approvalsJSON(d.PolicyDraft.Approvals), ApprovalsRequired: d.ApprovalsRequired, PublishedVersion: d.PublishedVersion,
		Diff: d.Diff, CreatedAt: timeOf(d.CreatedAt), UpdatedAt: timeOf(d.UpdatedAt)}
}

// versionParam reads the path's version number; false when it answered the refusal.
func versionParam(c *gin.Context) (int, bool) {
	n, err := strconv.Atoi(c.Param("version"))
	if err != nil || n < 1 {
		fail(c, apitypes.CodeNotFound, "A policy version is a number from 1.")
		return 0, false
	}
	return n, true
}

// versions answers GET /policies/{app}/versions: the published versions, newest first.
func (h *policyHandlers) versions(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	pg, ok := pageOrRefuse(c)
	if !ok {
		return
	}
	respondList(c, h.log, policyVersionJSON)(h.svc.PolicyVersions(c.Request.Context(), caller(c), c.Param("app"), pg))
}

// version answers GET /policies/{app}/versions/{version}: one version and its diff from
// the one before.
func (h *policyHandlers) version(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	if n, ok := versionParam(c); ok {
		respond(c, h.log, http.StatusOK, policyVersionDiffJSON)(h.svc.PolicyVersion(c.Request.Context(), caller(c), c.Param("app"), n))
	}
}

// rollback answers POST /policies/{app}/versions/{version}/rollback: a draft restoring the
// version, published at once when the policy asks for no approvals.
func (h *policyHandlers) rollback(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	if n, ok := versionParam(c); ok {
		respond(c, h.log, http.StatusCreated, policyDraftJSON)(h.svc.RollbackPolicy(c.Request.Context(), caller(c), c.Param("app"), n))
	}
}

// drafts answers GET /policies/{app}/drafts[?status=].
func (h *policyHandlers) drafts(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	pg, ok := pageOrRefuse(c)
	if !ok {
		return
	}
	respondList(c, h.log, func(d **service.PolicyDraftView) apitypes.PolicyDraft { return policyDraftJSON(*d) })(h.svc.PolicyDrafts(c.Request.Context(), caller(c), c.Param("app"), c.Query("status"), pg))
}

// draftBody is a draft's request body: rules, or (to create one) fromVersion.
type draftBody struct {
	Rules       json.RawMessage `json:"rules"`
	FromVersion int             `json:"fromVersion"`
}

// createDraft answers POST /policies/{app}/drafts.
func (h *policyHandlers) createDraft(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	var b draftBody
	if bindStrict(c, &b, "rules", "fromVersion") {
		respond(c, h.log, http.StatusCreated, policyDraftJSON)(h.svc.CreatePolicyDraft(c.Request.Context(), caller(c), c.Param("app"),
			service.PolicyDraftInput{Rules: b.Rules, FromVersion: b.FromVersion}))
	}
}

// draft answers GET /policies/{app}/drafts/{id}.
func (h *policyHandlers) draft(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	respond(c, h.log, http.StatusOK, policyDraftJSON)(h.svc.PolicyDraft(c.Request.Context(), caller(c), c.Param("app"), c.Param("id")))
}

// updateDraft answers PUT /policies/{app}/drafts/{id} {"rules": …}.
func (h *policyHandlers) updateDraft(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	var b draftBody
	if bindStrict(c, &b, "rules") {
		respond(c, h.log, http.StatusOK, policyDraftJSON)(h.svc.UpdatePolicyDraft(c.Request.Context(), caller(c), c.Param("app"), c.Param("id"), b.Rules))
	}
}

// draftAction answers POST /policies/{app}/drafts/{id}/{approve|publish|discard}.
func (h *policyHandlers) draftAction(act func(context.Context, service.Caller, string, string) (*service.PolicyDraftView, error), actions ...string) gin.HandlerFunc {
	return func(c *gin.Context) {
		narrowToPathApp(c, actions...)
		respond(c, h.log, http.StatusOK, policyDraftJSON)(act(c.Request.Context(), caller(c), c.Param("app"), c.Param("id")))
	}
}

// dryRunBody is the body of POST /policies/{app}/dry-runs.
type dryRunBody struct {
	DraftID  string `json:"draftId"`
	Days     int    `json:"days"`
	Examples int    `json:"examples"`
}

// startDryRun answers POST /policies/{app}/dry-runs: 202 and the run as it starts.
func (h *policyHandlers) startDryRun(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	var b dryRunBody
	if bindStrict(c, &b, "draftId", "days", "examples") {
		respond(c, h.log, http.StatusAccepted, policyDryRunJSON)(h.svc.StartPolicyDryRun(c.Request.Context(), caller(c), c.Param("app"),
			service.PolicyDryRunInput{DraftID: b.DraftID, Days: b.Days, Examples: b.Examples}))
	}
}

// dryRun answers GET /policies/{app}/dry-runs/{id}: its progress and report so far.
func (h *policyHandlers) dryRun(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	respond(c, h.log, http.StatusOK, policyDryRunJSON)(h.svc.PolicyDryRun(c.Request.Context(), caller(c), c.Param("app"), c.Param("id")))
}

func policyDryRunJSON(d *store.PolicyDryRun) apitypes.PolicyDryRun {
	out := apitypes.PolicyDryRun{ID: d.ID, App: d.App, DraftID: d.DraftID, Rules: rulesJSON(d.Document), Days: d.Days,
		Since: timeOf(d.Since), Until: timeOf(d.Until), Status: d.Status,
		Progress: apitypes.PolicyDryRunProgress{Evaluated: d.Evaluated, Total: d.Total}, Error: nullable(d.Error), Creator: creatorJSON(d.Creator),
		CreatedAt: timeOf(d.CreatedAt), UpdatedAt: timeOf(d.UpdatedAt), CompletedAt: timeOrNull(d.CompletedAt)}
	report := policy.NewHistoryReport()
	_ = json.Unmarshal([]byte(d.Report), report) // written by the dry run from this type
	out.Report = apitypes.PolicyDryRunReport{Evaluated: report.Evaluated, Unchanged: report.Unchanged,
		Shifts: map[string]apitypes.PolicyDryRunShift{}, ByRule: map[string]apitypes.PolicyRuleCounts{}}
	for name, s := range report.Shifts {
		shift := apitypes.PolicyDryRunShift{Count: s.Count, Examples: make([]apitypes.PolicyDryRunExample, len(s.Examples))}
		for i, ex := range s.Examples {
			shift.Examples[i] = apitypes.PolicyDryRunExample{OrderID: ex.OrderID, Domain: apitypes.Domain(ex.Domain), Href: orderHref(ex.Domain, ex.OrderID),
				AmountUSD: ex.AmountUSD, SubmittedAt: timeOf(ex.SubmittedAt), Before: ex.Before, After: ex.After}
		}
		out.Report.Shifts[name] = shift
	}
	for rule, n := range report.ByRule {
		out.Report.ByRule[rule] = *n
	}
	return out
}

// orderHref is an order's address in the API.
func orderHref(domain, id string) string {
	for _, d := range orders.Domains {
		if d.Name == domain {
			return apiBase + "/" + d.Collection + "/" + id
		}
	}
	return ""
}

// windows answers GET /policies/{app}/windows: the headroom of each volume window now.
func (h *policyHandlers) windows(c *gin.Context) {
	narrowToPathApp(c, auth.ActionDeveloper)
	ws, version, err := h.svc.PolicyWindows(c.Request.Context(), caller(c), c.Param("app"))
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusOK, apitypes.PolicyWindows{App: c.Param("app"), PolicyVersion: version, Windows: windowsJSON(ws)})
}
