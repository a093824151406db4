package console

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
)

// batchForm is the pay app's batch payment form, as the person filled it in, and what was
// wrong with it, line by line.
type batchForm struct {
	Wallets   []walletChoice
	WalletID  string
	Asset     string
	Reference string
	CSV       string
	Problems  []string
}

type walletChoice struct{ ID, Label, Chain string }

// batchWallets are the wallets a batch may be paid from: those not archived.
func (c *console) batchWallets(r *http.Request, rq *request) []walletChoice {
	ws, _, err := c.Service.WalletDirectory(r.Context(), rq.caller(r), service.Page{Limit: 200})
	if err != nil {
		return nil
	}
	var out []walletChoice
	for _, w := range ws {
		if w.ArchivedAt == nil {
			out = append(out, walletChoice{ID: w.ID, Label: w.Label, Chain: w.Chain})
		}
	}
	return out
}

// csvRecipient is one line of a batch's CSV: address, amount and an optional reference.
type csvRecipient struct {
	line int
	apitypes.Recipient
}

// readBatchCSV reads a batch's recipients, one per line as address,amount,reference (the
// reference may be left out), after an optional header naming those columns. Problems are
// said per line.
func readBatchCSV(text string) ([]csvRecipient, []string) {
	// A spreadsheet's UTF-8 export may begin with a byte order mark.
	cr := csv.NewReader(strings.NewReader(strings.TrimPrefix(text, "\ufeff")))
	cr.FieldsPerRecord, cr.TrimLeadingSpace = -1, true
	names := []string{"address", "amount", "reference"}
	columns := map[string]int{"address": 0, "amount": 1, "reference": 2}
	var (
		out      []csvRecipient
		problems []string
	)
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		var parse *csv.ParseError
		if errors.As(err, &parse) {
			return nil, append(problems, fmt.Sprintf("line %d: %v", parse.Line, parse.Err))
		}
		if err != nil {
			return nil, append(problems, err.Error())
		}
		line, _ := cr.FieldPos(0)
		isName := func(f string) bool { return slices.Contains(names, strings.ToLower(strings.TrimSpace(f))) }
		if first && slices.ContainsFunc(rec, isName) {
			// A header: it names the columns, in any order.
			columns = map[string]int{}
			for i, name := range rec {
				if !isName(name) {
					return nil, []string{fmt.Sprintf("line %d: the header names %q; the columns are address, amount, reference", line, strings.TrimSpace(name))}
				}
				columns[strings.ToLower(strings.TrimSpace(name))] = i
			}
			for _, need := range names[:2] {
				if _, ok := columns[need]; !ok {
					return nil, []string{fmt.Sprintf("line %d: the header has no %s column", line, need)}
				}
			}
			continue
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		field := func(name string) string {
			if i, ok := columns[name]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		if len(rec) > len(columns) {
			problems = append(problems, fmt.Sprintf("line %d: %d fields; a line is address,amount,reference", line, len(rec)))
			continue
		}
		out = append(out, csvRecipient{line: line, Recipient: apitypes.Recipient{Address: field("address"), Amount: field("amount"),
			Reference: field("reference")}})
	}
	return out, problems
}

// recipientField is a field error's recipient index and field, from "recipients[3].amount".
var recipientField = regexp.MustCompile(`^recipients\[(\d+)\](?:\.(\w+))?$`)

// createBatch makes a draft batch payment from the form's CSV and shows it; a CSV or an
// order with problems comes back with each problem on its line.
func (c *console) createBatch(w http.ResponseWriter, r *http.Request, rq *request) {
	domain, _ := service.DomainOfApp(rq.app)
	if domain.Name != orders.DomainPayment {
		c.failed(w, r, rq, &service.Error{Kind: service.NotFound, Detail: "Batches are payments: they are made in the pay app."})
		return
	}
	form := batchForm{WalletID: r.PostFormValue("walletId"), Asset: strings.TrimSpace(r.PostFormValue("asset")),
		Reference: strings.TrimSpace(r.PostFormValue("reference")), CSV: r.PostFormValue("csv")}
	if f, _, err := r.FormFile("file"); err == nil {
		b, err := io.ReadAll(io.LimitReader(f, 1<<20))
		_ = f.Close()
		if err == nil && len(strings.TrimSpace(string(b))) > 0 {
			form.CSV = string(b)
		}
	}
	recipients, problems := readBatchCSV(form.CSV)
	if len(problems) == 0 {
		body := struct {
			WalletID   string               `json:"walletId"`
			Asset      string               `json:"asset"`
			Reference  string               `json:"reference,omitempty"`
			Recipients []apitypes.Recipient `json:"recipients"`
		}{WalletID: form.WalletID, Asset: form.Asset, Reference: form.Reference, Recipients: make([]apitypes.Recipient, len(recipients))}
		for i, rc := range recipients {
			body.Recipients[i] = rc.Recipient
		}
		raw, _ := json.Marshal(body)
		o, err := c.Service.CreateOrder(r.Context(), rq.caller(r), domain, raw, nil)
		if err == nil {
			c.back(w, r, "/console/"+rq.app+"/orders/"+o.ID, nil,
				fmt.Sprintf("A batch payment to %d recipients was made as a draft: submit it to send it through the policy and approvals.", len(recipients)))
			return
		}
		var e *service.Error
		if !errors.As(err, &e) || e.Kind != service.Invalid {
			c.back(w, r, "/console/"+rq.app+"/orders", err, "")
			return
		}
		for _, f := range e.Fields {
			if m := recipientField.FindStringSubmatch(f.Field); m != nil {
				if i, _ := strconv.Atoi(m[1]); i < len(recipients) {
					problems = append(problems, fmt.Sprintf("line %d: %s %s", recipients[i].line, cmp.Or(m[2], "recipient"), f.Message))
					continue
				}
			}
			problems = append(problems, f.Field+" "+f.Message)
		}
	}
	form.Problems, form.Wallets = problems, c.batchWallets(r, rq)
	rq.v.Title = "Orders"
	c.render(w, r, rq, http.StatusUnprocessableEntity, "orders", ordersPage{Domain: domain.Name, Collection: domain.Collection,
		Statuses: orders.Statuses, Batch: &form})
}

// submitOrder submits a draft order from its page.
func (c *console) submitOrder(w http.ResponseWriter, r *http.Request, rq *request) {
	domain, _ := service.DomainOfApp(rq.app)
	o, err := c.Service.SubmitOrder(r.Context(), rq.caller(r), domain, r.PathValue("id"))
	c.after(w, r, "/console/"+rq.app+"/orders/"+r.PathValue("id"), err, func() string {
		return "Submitted: the order is " + string(o.Status) + "."
	})
}

// canWrite reports whether the person may create and submit the app's orders.
func canWrite(rq *request) bool { return rq.p.InApp(rq.app).Can(rq.app, auth.ActionWrite) }
