package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

// The policy pages: the policy in force with its volume windows' headroom and its
// history, drafts and their approvals (maker-checker), rollbacks, the dry run of an order
// and a draft's dry run against history (dryruns.go). Every form calls the service
// function of the matching /api/v1/policies route.
func (c *console) policyRoutes() []route {
	return []route{
		{"GET /console/{app}/policy", "policy", c.policy},
		{"POST /console/{app}/policy", "policy", c.putPolicy},
		{"POST /console/{app}/policy/evaluate", "policy", c.evaluate},
		{"POST /console/{app}/policy/drafts", "policy", c.createDraft},
		{"GET /console/{app}/policy/drafts/{id}", "policy", c.draft},
		{"POST /console/{app}/policy/drafts/{id}", "policy", c.updateDraft},
		{"POST /console/{app}/policy/drafts/{id}/approve", "policy", c.approveDraft},
		{"POST /console/{app}/policy/drafts/{id}/publish", "policy", c.publishDraft},
		{"POST /console/{app}/policy/drafts/{id}/discard", "policy", c.discardDraft},
		{"POST /console/{app}/policy/drafts/{id}/dry-runs", "policy", c.startDryRun},
		{"GET /console/{app}/policy/dry-runs/{id}", "policy", c.dryRun},
		{"GET /console/{app}/policy/versions/{version}", "policy", c.policyVersion},
		{"POST /console/{app}/policy/versions/{version}/rollback", "policy", c.rollback},
	}
}

// versionsShown is how many versions the policy page's history shows at a time;
// dryRunsShown how many dry runs against history it and a draft's page list.
const (
	versionsShown = 20
	dryRunsShown  = 5
)

type policyPage struct {
	CanEdit bool
	// Version is the version in force (0: no policy yet), published at UpdatedAt by By;
	// Restores the version it rolled back to, when it did.
	Version   int
	By        string
	UpdatedAt time.Time
	Restores  *int
	// Rules is the policy in force, indented; ChangeApprovals how many people other than
	// a draft's author must approve a change.
	Rules           string
	ChangeApprovals int
	// DryRuns are the latest dry runs against history, of any draft.
	DryRuns []dryRunRow
	// Windows is the headroom of each volume window of the policy in force (version
	// WindowsVersion), now.
	Windows        []policy.WindowUse
	WindowsVersion int
	// Draft is the text of the new draft's form: the rules in force, or what was typed
	// (DraftTyped), which opens the form.
	Draft        string
	DraftTyped   bool
	Drafts       []draftRow
	Versions     []versionRow
	NextVersions string
	// The dry run: the order typed, the draft it is tried against ("" the policy in
	// force), and its result.
	Body       string
	Target     string
	Evaluation *service.Evaluation
	Violations []policy.Check
}

// draftRow is an open draft as the policy page lists it.
type draftRow struct {
	ID, Author          string
	UpdatedAt           time.Time
	Approvals, Required int
	Restores            *int
	Stale               bool
	// Changes are the rules it changes from the version in force.
	Changes []string
}

// versionRow is a published version as the pages list it.
type versionRow struct {
	Version     int
	Author      string
	PublishedAt time.Time
	DraftID     string
	Approvers   []string
	Restores    *int
	InForce     bool
}

// change is one rule a version or a draft changes, for the page: its values as JSON text.
type change struct {
	Rule, Kind, Text string
	Added, Removed   []string
}

func changes(diff []policy.Change) []change {
	out := make([]change, len(diff))
	for i, d := range diff {
		out[i] = change{Rule: d.Rule, Kind: d.Kind, Text: d.Text}
		for _, e := range d.Added {
			out[i].Added = append(out[i].Added, string(e))
		}
		for _, e := range d.Removed {
			out[i].Removed = append(out[i].Removed, string(e))
		}
	}
	return out
}

// names are the e-mail addresses of the organisation's people by id, to say who wrote and
// approved the rules; an id not in it is shown as it is.
type names map[string]string

// people reads the names the caller may see (those who see the team page); none when the
// list is refused.
func (c *console) people(ctx context.Context, who service.Caller) names {
	n := names{}
	list, _, err := c.Service.ListTeam(ctx, who, service.Page{Limit: 500})
	if err != nil {
		return n
	}
	for _, m := range list {
		n[m.ID] = m.Email
	}
	return n
}

// of names a person, or when there is none behind it (the seed, a key) the credential.
func (n names) of(person, credential string) string {
	if person == "" {
		person = credential
	}
	if email, ok := n[person]; ok {
		return email
	}
	return cmp.Or(person, "—")
}

func (n names) approvers(raw string) []string {
	var as []service.DraftApproval
	_ = json.Unmarshal([]byte(raw), &as) // written by the service from this type
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = n.of(a.By, "")
	}
	return out
}

func (n names) version(v *store.PolicyVersion, inForce int) versionRow {
	return versionRow{Version: v.Version, Author: n.of(v.AuthorPerson, v.Author), PublishedAt: v.PublishedAt, DraftID: deref(v.DraftID),
		Approvers: n.approvers(v.Approvals), Restores: v.Restores, InForce: v.Version == inForce}
}

// policyForm is what the policy page's forms sent, shown again with the page.
type policyForm struct {
	Draft, Body, Target string
	Evaluation          *service.Evaluation
}

// policy shows the app's policy: the rules in force and their history, the open drafts
// and a form to start one (developer), and the dry run (write or developer).
func (c *console) policy(w http.ResponseWriter, r *http.Request, rq *request) {
	c.policyPage(w, r, rq, http.StatusOK, policyForm{Target: r.URL.Query().Get("draft")})
}

func (c *console) policyPage(w http.ResponseWriter, r *http.Request, rq *request, status int, f policyForm) {
	rq.v.Title = "Policy"
	ctx, who := r.Context(), rq.caller(r)
	page := policyPage{CanEdit: rq.p.Can(rq.app, auth.ActionDeveloper), Body: f.Body, Target: f.Target, Evaluation: f.Evaluation}
	if page.Body == "" {
		page.Body = sampleOrder(rq.app, c.sampleWallet(r, rq))
	}
	if f.Evaluation != nil {
		page.Violations = f.Evaluation.Violations()
	}
	if !page.CanEdit {
		c.render(w, r, rq, status, "policy", page)
		return
	}
	p, err := c.Service.Policy(ctx, who, rq.app)
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	n := c.people(ctx, who)
	page.Version, page.UpdatedAt, page.Rules = p.Version, p.UpdatedAt, indent(p.Document)
	page.By = n.of(p.UpdatedBy, "")
	page.Draft, page.DraftTyped = cmp.Or(f.Draft, page.Rules), f.Draft != ""
	if rules, err := policy.Parse([]byte(p.Document)); err == nil {
		page.ChangeApprovals = rules.ChangeApprovals
	}
	if page.Windows, page.WindowsVersion, err = c.Service.PolicyWindows(ctx, who, rq.app); err != nil {
		c.failed(w, r, rq, err)
		return
	}
	drafts, _, err := c.Service.PolicyDrafts(ctx, who, rq.app, store.DraftOpen, service.Page{Limit: pageSize})
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	for _, d := range drafts {
		row := draftRow{ID: d.ID, Author: n.of(d.AuthorPerson, d.Author), UpdatedAt: d.UpdatedAt, Approvals: len(d.Approvals),
			Required: d.ApprovalsRequired, Restores: d.Restores, Stale: d.BaseVersion != d.InForceVersion}
		for _, ch := range d.Diff {
			row.Changes = append(row.Changes, ch.Rule)
		}
		page.Drafts = append(page.Drafts, row)
	}
	if page.DryRuns, err = c.dryRuns(r, rq, n, "", dryRunsShown); err != nil {
		c.failed(w, r, rq, err)
		return
	}
	versions, next, err := c.Service.PolicyVersions(ctx, who, rq.app, service.Page{After: r.URL.Query().Get("after"), Limit: versionsShown})
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	for i := range versions {
		row := n.version(&versions[i], p.Version)
		if row.InForce {
			page.Restores = row.Restores
		}
		page.Versions = append(page.Versions, row)
	}
	page.NextVersions = next
	c.render(w, r, rq, status, "policy", page)
}

// putPolicy publishes the typed rules at once, as the next version: only while the policy
// in force asks for no approval of its changes.
func (c *console) putPolicy(w http.ResponseWriter, r *http.Request, rq *request) {
	rules := r.PostFormValue("rules")
	p, err := c.Service.PutPolicy(r.Context(), rq.caller(r), rq.app, []byte(rules))
	if err != nil {
		rq.v.Error = message(err)
		c.policyPage(w, r, rq, c.statusOf(r, err), policyForm{Draft: rules})
		return
	}
	c.back(w, r, "/console/"+rq.app+"/policy", nil,
		fmt.Sprintf("Published as version %d: it applies to orders submitted from now on.", p.Version))
}

// evaluate runs the dry run of an order body against the policy in force or a draft.
func (c *console) evaluate(w http.ResponseWriter, r *http.Request, rq *request) {
	f := policyForm{Body: r.PostFormValue("order"), Target: r.PostFormValue("draft")}
	e, err := c.Service.EvaluatePolicy(r.Context(), rq.caller(r), rq.app, []byte(f.Body), 0, f.Target)
	if err != nil {
		rq.v.Error = message(err)
		c.policyPage(w, r, rq, c.statusOf(r, err), f)
		return
	}
	f.Evaluation = e
	c.policyPage(w, r, rq, http.StatusOK, f)
}

// createDraft starts a draft from the typed rules. A refusal shows the page again with
// the rules as typed.
func (c *console) createDraft(w http.ResponseWriter, r *http.Request, rq *request) {
	rules := r.PostFormValue("rules")
	d, err := c.Service.CreatePolicyDraft(r.Context(), rq.caller(r), rq.app, service.PolicyDraftInput{Rules: json.RawMessage(rules)})
	if err != nil {
		rq.v.Error = message(err)
		c.policyPage(w, r, rq, c.statusOf(r, err), policyForm{Draft: rules})
		return
	}
	c.back(w, r, draftPath(rq.app, d.ID), nil, "Draft saved. "+stillNeeded(d))
}

// stillNeeded says what an open draft waits for.
func stillNeeded(d *service.PolicyDraftView) string {
	left := d.ApprovalsRequired - len(d.Approvals)
	if left <= 0 {
		return "It needs no approval: publish it when it is ready."
	}
	return fmt.Sprintf("It is published once %d more person(s) other than its author approve it.", left)
}

func draftPath(app, id string) string { return "/console/" + app + "/policy/drafts/" + id }

type draftPage struct {
	Draft     *service.PolicyDraftView
	Author    string
	Approvals []approval
	Changes   []change
	// Rules is the draft's rules, indented, or the text a refused save sent.
	Rules string
	// Mine: the person looking saved it last, and may not approve it; Approved: they
	// approved it already.
	Mine, Approved         bool
	CanEdit                bool
	CanApprove, CanPublish bool
	// Completes: the person's approval would be the last one needed, and publish it.
	Completes bool
	// Stale: a version was published since the draft was saved.
	Stale bool
	// DryRuns are its latest dry runs against history; DryRunDays the form's default.
	DryRuns    []dryRunRow
	DryRunDays int
}

type approval struct {
	By string
	At time.Time
}

// draft shows a draft: what it changes from the version in force, its approvals, and
// what the person looking may do with it.
func (c *console) draft(w http.ResponseWriter, r *http.Request, rq *request) {
	c.draftPage(w, r, rq, http.StatusOK, "")
}

func (c *console) draftPage(w http.ResponseWriter, r *http.Request, rq *request, status int, typed string) {
	ctx, who := r.Context(), rq.caller(r)
	d, err := c.Service.PolicyDraft(ctx, who, rq.app, r.PathValue("id"))
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	rq.v.Title = "Policy draft " + d.ID
	n := c.people(ctx, who)
	open := d.Status == store.DraftOpen
	page := draftPage{Draft: d, Author: n.of(d.AuthorPerson, d.Author), Changes: changes(d.Diff), Rules: cmp.Or(typed, indent(d.Document)),
		Mine: who.ID == d.Author || (who.Person != "" && who.Person == d.AuthorPerson), CanEdit: rq.p.Can(rq.app, auth.ActionDeveloper),
		Stale: open && d.BaseVersion != d.InForceVersion}
	for _, a := range d.Approvals {
		page.Approvals = append(page.Approvals, approval{By: n.of(a.By, ""), At: a.At})
		page.Approved = page.Approved || a.By == who.Person
	}
	enough := len(d.Approvals) >= d.ApprovalsRequired
	page.CanApprove = open && !enough && !page.Mine && !page.Approved && (rq.p.Role == auth.RoleOwner || page.CanEdit)
	page.CanPublish = open && enough && page.CanEdit
	page.Completes = len(d.Approvals)+1 >= d.ApprovalsRequired
	page.DryRunDays = service.DefaultDryRunDays
	if page.DryRuns, err = c.dryRuns(r, rq, n, d.ID, dryRunsShown); err != nil {
		c.failed(w, r, rq, err)
		return
	}
	c.render(w, r, rq, status, "policy_draft", page)
}

// updateDraft saves a draft's new rules: its approvals so far are withdrawn and the
// person saving becomes its author. A refusal shows the draft again with the rules as
// typed.
func (c *console) updateDraft(w http.ResponseWriter, r *http.Request, rq *request) {
	rules := r.PostFormValue("rules")
	d, err := c.Service.UpdatePolicyDraft(r.Context(), rq.caller(r), rq.app, r.PathValue("id"), json.RawMessage(rules))
	if err != nil {
		rq.v.Error = message(err)
		c.draftPage(w, r, rq, c.statusOf(r, err), rules)
		return
	}
	c.back(w, r, draftPath(rq.app, d.ID), nil, "Draft saved, with you as its author: approvals given before, if any, are withdrawn. "+stillNeeded(d))
}

// approveDraft records the person's approval; the draft is published when it completes
// the quorum.
func (c *console) approveDraft(w http.ResponseWriter, r *http.Request, rq *request) {
	d, err := c.Service.ApprovePolicyDraft(r.Context(), rq.caller(r), rq.app, r.PathValue("id"))
	if err == nil && d.Status == store.DraftPublished {
		c.back(w, r, "/console/"+rq.app+"/policy", nil, fmt.Sprintf("Approved and published as version %d: it applies to orders submitted from now on.",
			*d.PublishedVersion))
		return
	}
	done := ""
	if err == nil {
		done = fmt.Sprintf("Approved: %d of the %d approval(s) needed.", len(d.Approvals), d.ApprovalsRequired)
	}
	c.back(w, r, draftPath(rq.app, r.PathValue("id")), err, done)
}

// publishDraft publishes a draft that needs no more approvals.
func (c *console) publishDraft(w http.ResponseWriter, r *http.Request, rq *request) {
	d, err := c.Service.PublishPolicyDraft(r.Context(), rq.caller(r), rq.app, r.PathValue("id"))
	if err != nil {
		c.back(w, r, draftPath(rq.app, r.PathValue("id")), err, "")
		return
	}
	c.back(w, r, "/console/"+rq.app+"/policy", nil, fmt.Sprintf("Published as version %d: it applies to orders submitted from now on.",
		*d.PublishedVersion))
}

// discardDraft closes a draft unpublished.
func (c *console) discardDraft(w http.ResponseWriter, r *http.Request, rq *request) {
	d, err := c.Service.DiscardPolicyDraft(r.Context(), rq.caller(r), rq.app, r.PathValue("id"))
	if err != nil {
		c.back(w, r, draftPath(rq.app, r.PathValue("id")), err, "")
		return
	}
	c.back(w, r, "/console/"+rq.app+"/policy", nil, "Draft "+d.ID+" discarded: nothing was published.")
}

type versionPage struct {
	Version versionRow
	// Previous is the version before it, which Changes are from.
	Previous int
	Changes  []change
	Rules    string
	// NextVersion and ChangeApprovals are the policy in force's next version and change
	// approvals: a rollback publishes at once when it asks for none.
	NextVersion     int
	ChangeApprovals int
	CanEdit         bool
}

// versionParam is the path's version number; 0 when it is not one.
func versionParam(r *http.Request) int {
	n, err := strconv.Atoi(r.PathValue("version"))
	if err != nil || n < 1 {
		return 0
	}
	return n
}

var noSuchVersion = errorPage{Title: "Not found", Message: "A policy version is a number from 1."}

// policyVersion shows a published version: its rules, what it changed from the version
// before, and a rollback to it.
func (c *console) policyVersion(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx, who := r.Context(), rq.caller(r)
	n := versionParam(r)
	if n == 0 {
		c.render(w, r, rq, http.StatusNotFound, "error", noSuchVersion)
		return
	}
	v, err := c.Service.PolicyVersion(ctx, who, rq.app, n)
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	p, err := c.Service.Policy(ctx, who, rq.app)
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	rq.v.Title = fmt.Sprintf("Policy version %d", n)
	page := versionPage{Version: c.people(ctx, who).version(&v.PolicyVersion, p.Version), Changes: changes(v.Diff), Rules: indent(v.Document),
		Previous: n - 1, NextVersion: p.Version + 1, CanEdit: rq.p.Can(rq.app, auth.ActionDeveloper)}
	if rules, err := policy.Parse([]byte(p.Document)); err == nil {
		page.ChangeApprovals = rules.ChangeApprovals
	}
	c.render(w, r, rq, http.StatusOK, "policy_version", page)
}

// rollback restores a version's rules: published at once when the policy in force asks
// for no approval, otherwise a draft that waits for them.
func (c *console) rollback(w http.ResponseWriter, r *http.Request, rq *request) {
	n := versionParam(r)
	if n == 0 {
		c.render(w, r, rq, http.StatusNotFound, "error", noSuchVersion)
		return
	}
	d, err := c.Service.RollbackPolicy(r.Context(), rq.caller(r), rq.app, n)
	switch {
	case err != nil:
		c.back(w, r, fmt.Sprintf("/console/%s/policy/versions/%d", rq.app, n), err, "")
	case d.Status == store.DraftPublished:
		c.back(w, r, "/console/"+rq.app+"/policy", nil, fmt.Sprintf("Version %d restored: published as version %d, it applies to orders submitted from now on.",
			n, *d.PublishedVersion))
	default:
		c.back(w, r, draftPath(rq.app, d.ID), nil, fmt.Sprintf("Draft saved to restore version %d. %s", n, stillNeeded(d)))
	}
}
