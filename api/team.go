package api

import (
	"cmp"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/sessioncookie"
)

// teamHandlers serve /developer/team: the organisation's people and what each may do in
// the app. Anyone with Developer on the app reads it; only the owner changes it.
type teamHandlers struct {
	svc *service.Service
	log *slog.Logger
	// publicURL is where sign-in links point; empty: where the owner reached the API.
	publicURL string
}

func memberJSON(m *service.Member) apitypes.TeamMember {
	return apitypes.TeamMember{ID: m.ID, Email: m.Email, Role: m.Role, App: m.App, Actions: m.Actions,
		CreatedAt: timeOf(m.CreatedAt)}
}

// list answers GET /developer/team: every person of the organisation with their actions
// on the app (none yet for some).
func (h *teamHandlers) list(c *gin.Context) {
	listPage(c, h.log, h.svc.ListTeam, memberJSON)
}

// add answers POST /developer/team {email, actions}: a new member of the organisation with
// these actions on the app, and their one-time sign-in link (24 h) in this answer only.
func (h *teamHandlers) add(c *gin.Context) {
	var req struct {
		Email   string   `json:"email"`
		Actions []string `json:"actions"`
	}
	if !bindStrict(c, &req, "email", "actions") {
		return
	}
	m, link, err := h.svc.AddMember(c.Request.Context(), caller(c), req.Email, req.Actions)
	withSecret(c, h.log, http.StatusCreated, memberJSON, "signInLink")(m, link.URL(cmp.Or(h.publicURL, sessioncookie.Origin(c.Request))), err)
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
	respond(c, h.log, http.StatusOK, memberJSON)(h.svc.SetMemberActions(c.Request.Context(), caller(c), c.Param("id"), *req.Actions))
}

// remove answers DELETE /developer/team/{id}: the member keeps their account but holds
// nothing on the app any more.
func (h *teamHandlers) remove(c *gin.Context) {
	respond(c, h.log, http.StatusOK, memberJSON)(h.svc.RemoveMember(c.Request.Context(), caller(c), c.Param("id")))
}
