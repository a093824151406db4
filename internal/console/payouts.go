package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/opentreasury/treasury/internal/service"
)

// payoutsPage lists the pay app's payout schedules, with the form of a new one.
type payoutsPage struct {
	Schedules []service.PayoutSchedule
	Wallets   []walletChoice
	CanWrite  bool
}

// payoutPage is one schedule with its latest runs.
type payoutPage struct {
	Schedule *service.PayoutSchedule
	Payment  string
	Runs     []service.PayoutRunView
	CanWrite bool
}

// runsShown is how many of a schedule's runs its page lists, the latest first.
const runsShown = 50

func (c *console) payoutRoutes() []route {
	return []route{
		{"GET /console/{app}/payouts", "payouts", c.payouts},
		{"POST /console/{app}/payouts", "payouts", c.createPayout},
		{"GET /console/{app}/payouts/{id}", "payouts", c.payout},
		{"POST /console/{app}/payouts/{id}/pause", "payouts", c.pausePayout},
		{"POST /console/{app}/payouts/{id}/delete", "payouts", c.deletePayout},
	}
}

func (c *console) payouts(w http.ResponseWriter, r *http.Request, rq *request) {
	c.show(w, r, rq, "Payout schedules", "payouts", func() (any, error) {
		list, _, err := c.Service.ListPayoutSchedules(r.Context(), rq.caller(r), service.Page{Limit: 200})
		page := payoutsPage{Schedules: list, CanWrite: canWrite(rq)}
		if page.CanWrite && err == nil {
			page.Wallets = c.batchWallets(r, rq)
		}
		return page, err
	})
}

// createPayout makes a schedule of a single payment from the form: the API takes batches
// too, and so does a schedule made there.
func (c *console) createPayout(w http.ResponseWriter, r *http.Request, rq *request) {
	field := func(name string) string { return strings.TrimSpace(r.PostFormValue(name)) }
	payment := map[string]any{"walletId": field("walletId"), "asset": field("asset"), "amount": field("amount"),
		"destination": map[string]string{"address": field("address")}}
	if ref := field("reference"); ref != "" {
		payment["reference"] = ref
	}
	body, err := json.Marshal(payment)
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	in := service.PayoutScheduleInput{Payment: body, Timezone: field("timezone")}
	if when := field("when"); strings.HasPrefix(when, "P") {
		in.Every = when
	} else {
		in.Cron = when
	}
	p, err := c.Service.CreatePayoutSchedule(r.Context(), rq.caller(r), in)
	if err != nil {
		c.back(w, r, "/console/"+rq.app+"/payouts", err, "")
		return
	}
	c.back(w, r, "/console/"+rq.app+"/payouts/"+p.ID, nil, "Created: its first run comes at its first time.")
}

func (c *console) payout(w http.ResponseWriter, r *http.Request, rq *request) {
	p, err := c.Service.GetPayoutSchedule(r.Context(), rq.caller(r), r.PathValue("id"))
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	runs, _, err := c.Service.PayoutRuns(r.Context(), rq.caller(r), p.ID, service.Page{Limit: runsShown})
	if err != nil {
		c.failed(w, r, rq, err)
		return
	}
	rq.v.Title = "Payout schedule " + p.ID
	var payment bytes.Buffer
	if json.Indent(&payment, []byte(p.Payment), "", "  ") != nil {
		payment.WriteString(p.Payment)
	}
	c.render(w, r, rq, http.StatusOK, "payout", payoutPage{Schedule: p, Payment: payment.String(), Runs: runs, CanWrite: canWrite(rq)})
}

func (c *console) pausePayout(w http.ResponseWriter, r *http.Request, rq *request) {
	paused := r.PostFormValue("paused") == "true"
	_, err := c.Service.PausePayoutSchedule(r.Context(), rq.caller(r), r.PathValue("id"), paused)
	c.after(w, r, "/console/"+rq.app+"/payouts/"+r.PathValue("id"), err, func() string {
		if paused {
			return "Paused: the times that pass now are skipped."
		}
		return "Resumed: it runs at its next time."
	})
}

func (c *console) deletePayout(w http.ResponseWriter, r *http.Request, rq *request) {
	err := c.Service.DeletePayoutSchedule(r.Context(), rq.caller(r), r.PathValue("id"))
	if err != nil {
		c.back(w, r, "/console/"+rq.app+"/payouts/"+r.PathValue("id"), err, "")
		return
	}
	c.back(w, r, "/console/"+rq.app+"/payouts", nil, "Deleted "+r.PathValue("id")+": it runs no more; its orders stay.")
}
