package api

import (
	"errors"
	"log/slog"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/auth"
	"github.com/opentreasury/treasury/events"
	"github.com/opentreasury/treasury/ids"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
)

// teamHandlers serve /developer/team: the organisation's people and what each may do in
// the app. Anyone with Developer on the app reads it; only the owner changes it.
type teamHandlers struct {
	store *store.Store
	log   *slog.Logger
}

type memberResponse struct {
	ID        string   `json:"id"`
	Email     string   `json:"email"`
	Role      string   `json:"role"`
	App       string   `json:"app"`
	Actions   []string `json:"actions"`
	CreatedAt string   `json:"createdAt"`
	// Password is the initial password, present only in the answer that adds the person.
	Password string `json:"password,omitempty"`
}

func memberJSON(u *store.User, app, actions string) memberResponse {
	list := auth.ParseActions(actions)
	if u.Role == store.RoleOwner {
		list = auth.AllActions
	}
	if list == nil {
		list = []string{}
	}
	return memberResponse{ID: u.ID, Email: u.Email, Role: u.Role, App: app, Actions: list, CreatedAt: formatTime(u.CreatedAt)}
}

// requireOwner lets through the organisation's owner, signed in.
func requireOwner() gin.HandlerFunc {
	return func(c *gin.Context) {
		if p := principalOf(c); p.Kind != auth.KindUser || p.Role != store.RoleOwner {
			fail(c, CodePermissionDenied, "Only the organisation's owner, signed in, grants or removes permissions.")
			return
		}
		c.Next()
	}
}

// list answers GET /developer/team: every person of the organisation with their actions
// on the app (none yet for some).
func (h *teamHandlers) list(c *gin.Context) {
	pg, errs := listParams(c, "limit", "cursor")
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	p := principalOf(c)
	rows, err := h.store.ListMembers(c.Request.Context(), p.OrgID, p.App)
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	// In the store's order: oldest first (the owner), ties by id.
	rows, next := pageInMemory(rows, pg, false, func(m *store.Member) string {
		return events.FormatTime(m.User.CreatedAt) + "/" + m.User.ID
	})
	out := make([]memberResponse, len(rows))
	for i := range rows {
		out[i] = memberJSON(&rows[i].User, p.App, rows[i].Actions)
	}
	c.JSON(http.StatusOK, listResponse[memberResponse]{Data: out, NextCursor: next})
}

// readActions validates a permission list: known actions, sorted, each once.
func readActions(actions []string) ([]string, []orders.FieldError) {
	var errs []orders.FieldError
	for _, a := range actions {
		if !auth.IsAction(a) {
			errs = append(errs, orders.FieldError{Field: "actions", Message: a + " is not an action (read, write, approve, sign, developer)"})
		}
	}
	out := slices.Clone(actions)
	slices.Sort(out)
	return slices.Compact(out), errs
}

// add answers POST /developer/team {email, actions}: a new member of the organisation with
// these actions on the app, and an initial password shown in this answer only.
func (h *teamHandlers) add(c *gin.Context) {
	var req struct {
		Email   string   `json:"email"`
		Actions []string `json:"actions"`
	}
	if !bindStrict(c, &req, "email", "actions") {
		return
	}
	email := strings.ToLower(strings.TrimSpace(req.Email))
	actions, errs := readActions(req.Actions)
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email || len(email) > 254 {
		errs = append(errs, orders.FieldError{Field: "email", Message: "must be an e-mail address"})
	}
	if len(actions) == 0 {
		errs = append(errs, orders.FieldError{Field: "actions", Message: "needs at least one action on this app"})
	}
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	password, err := auth.NewPassword()
	var hash string
	if err == nil {
		hash, err = auth.HashPassword(password)
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	p := principalOf(c)
	u := &store.User{ID: ids.New(ids.User), OrgID: p.OrgID, Email: email, PasswordHash: hash, Role: store.RoleMember,
		CreatedAt: time.Now().UTC()}
	perm := store.MemberPermission{App: p.App, Actions: auth.FormatActions(actions)}
	err = h.store.Tx(c.Request.Context(), func(tx *store.Store) error {
		if err := tx.AddMember(c.Request.Context(), u, perm); err != nil {
			return err
		}
		return auditDeveloperAction(c, tx, "member.added", "user", u.ID, map[string]any{"actions": actions})
	})
	if errors.Is(err, store.ErrEmailTaken) {
		fail(c, CodeConflict, "Someone already signs in with this e-mail address; to change a member's permissions, PATCH /developer/team/{id}.")
		return
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	out := memberJSON(u, p.App, perm.Actions)
	out.Password = password
	replyWithSecret(c, out, "password")
}

// update answers PATCH /developer/team/{id} {actions}: the member's actions on the app,
// replaced; an empty list removes them from the app. Their sessions see it at once.
func (h *teamHandlers) update(c *gin.Context) {
	var req struct {
		Actions *[]string `json:"actions"`
	}
	if !bindStrict(c, &req, "actions") {
		return
	}
	if req.Actions == nil {
		validationFailed(c, []orders.FieldError{{Field: "actions", Message: "is required ([] removes every action)"}})
		return
	}
	actions, errs := readActions(*req.Actions)
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	h.setActions(c, actions, "member.permissions_changed")
}

// remove answers DELETE /developer/team/{id}: the member keeps their account but holds
// nothing on the app any more.
func (h *teamHandlers) remove(c *gin.Context) { h.setActions(c, nil, "member.removed") }

func (h *teamHandlers) setActions(c *gin.Context, actions []string, auditAction string) {
	p := principalOf(c)
	ctx := c.Request.Context()
	u, err := h.store.UserInOrg(ctx, p.OrgID, c.Param("id"))
	if errors.Is(err, store.ErrNotFound) {
		fail(c, CodeNotFound, "No person of this organisation has this id.")
		return
	}
	if err != nil {
		requestFailed(c, h.log, err)
		return
	}
	if u.Role == store.RoleOwner {
		fail(c, CodeConflict, "The owner holds every action on every app; that does not change.")
		return
	}
	perm := store.MemberPermission{UserID: u.ID, App: p.App, Actions: auth.FormatActions(actions)}
	if !writeAudited(c, h.store, h.log, func(tx *store.Store) error { return tx.SetMemberPermission(ctx, perm) },
		auditAction, "user", u.ID, map[string]any{"actions": memberJSON(u, p.App, perm.Actions).Actions}) {
		return
	}
	c.JSON(http.StatusOK, memberJSON(u, p.App, perm.Actions))
}
