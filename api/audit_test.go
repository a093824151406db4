package api

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/auditchain"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// auditPayments creates n draft payments with pay's sk: an audit record each.
func auditPayments(t *testing.T, f *fixture, n int) {
	t.Helper()
	for range n {
		r := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, `{"walletId":"`+f.creds.Wallets[0].ID+
			`","asset":"USDC","amount":"5","destination":{"address":"0x1111111111111111111111111111111111111111"}}`)
		if r.status != 201 {
			t.Fatalf("create payment: %d %s", r.status, r.body)
		}
	}
}

// exportAll reads a whole export window, answer after answer as Next-Cursor continues it.
func exportAll(t *testing.T, f *fixture, token string, q url.Values) (body []byte, answers int) {
	t.Helper()
	for {
		r := f.do(t, "GET", "/api/v1/audit-logs/export?"+q.Encode(), token, nil)
		if r.status != 200 || r.header.Get("Content-Type") != "application/jsonl" {
			t.Fatalf("export %s: %d %q %s", q.Encode(), r.status, r.header.Get("Content-Type"), r.body)
		}
		body, answers = append(body, r.body...), answers+1
		next := r.header.Get("Next-Cursor")
		if next == "" {
			return body, answers
		}
		q.Set("cursor", next)
	}
}

func auditPage(t *testing.T, f *fixture, token string) apitypes.AuditLogPage {
	t.Helper()
	r := f.do(t, "GET", "/api/v1/audit-logs?limit=200", token, nil)
	var page apitypes.AuditLogPage
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 {
		t.Fatalf("audit logs: %d %s", r.status, r.body)
	}
	return page
}

func verifyAnswer(t *testing.T, f *fixture, token string) apitypes.AuditChainCheck {
	t.Helper()
	r := f.do(t, "GET", "/api/v1/audit-logs/verify", token, nil)
	var check apitypes.AuditChainCheck
	if err := json.Unmarshal(r.body, &check); err != nil || r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	return check
}

func TestAuditLogsShowTheChainAndItsHead(t *testing.T) {
	f := newFixture(t)
	auditPayments(t, f, 3)
	dashboard := auditPage(t, f, f.creds.Keys["treasury"].Read)
	head := dashboard.ChainHead
	// The seeding's records and the three payments', newest first, each linked to the next.
	if head == nil || head.Seq < 4 || len(dashboard.Data) != int(head.Seq) || dashboard.Data[0].Hash != head.Hash {
		t.Fatalf("page %+v, head %+v", dashboard.Data, head)
	}
	n := len(dashboard.Data)
	for i, a := range dashboard.Data {
		if a.Seq != int64(n-i) || (i+1 < n && a.PrevHash != dashboard.Data[i+1].Hash) {
			t.Fatalf("record %d: seq %d prevHash %s", i, a.Seq, a.PrevHash)
		}
		if (i < 3) != (a.Action == "payment.created") {
			t.Fatalf("record %d is %s; the three newest are the payments", i, a.Action)
		}
	}
	if last := dashboard.Data[n-1]; last.PrevHash != auditchain.Genesis {
		t.Fatalf("the first record's prevHash is %s", last.PrevHash)
	}
	// Pay's reader sees its own records only, with the organisation's head.
	pay := auditPage(t, f, f.creds.Keys["pay"].Read)
	if len(pay.Data) < 3 || pay.ChainHead == nil || *pay.ChainHead != *head {
		t.Fatalf("pay's page: %d records, head %+v", len(pay.Data), pay.ChainHead)
	}
	for _, a := range pay.Data {
		if a.App != "pay" {
			t.Fatalf("pay's reader sees a record of %s: %+v", a.App, a)
		}
	}
}

func TestAuditExportVerifiesOfflineAndPagesByTime(t *testing.T) {
	f := newFixture(t)
	auditPayments(t, f, 5)
	dashboard := f.creds.Keys["treasury"].Read
	head := auditPage(t, f, dashboard).ChainHead
	n := int(head.Seq) // the seeding's records and the five payments'

	whole, answers := exportAll(t, f, dashboard, url.Values{"limit": {"2"}})
	if answers != (n+1)/2 {
		t.Fatalf("%d entries, 2 an answer, came in %d answers", n, answers)
	}
	res, err := auditchain.ReadJSONL(bytes.NewReader(whole), &auditchain.Verifier{FromGenesis: true, Want: head})
	if err != nil || res.Broken != nil || res.Entries != int64(n) || *res.Head != *head {
		t.Fatalf("the export: %+v %v %v\n%s", res, res.Broken, err, whole)
	}
	if check := verifyAnswer(t, f, dashboard); !check.Intact || check.Entries != int64(n) || *check.Head != *head || check.FirstBroken != nil {
		t.Fatalf("the stored chain: %+v", check)
	}

	// Two windows that meet make two runs that meet: together, the whole chain.
	var fourth auditchain.Entry
	_ = json.Unmarshal(bytes.Split(whole, []byte("\n"))[3], &fourth)
	at := fourth.CreatedAt.Format("2006-01-02T15:04:05.000Z07:00")
	before, _ := exportAll(t, f, dashboard, url.Values{"until": {at}})
	after, _ := exportAll(t, f, dashboard, url.Values{"since": {at}, "limit": {"1"}})
	if len(before) == 0 || len(after) == 0 || !bytes.Equal(append(before, after...), whole) {
		t.Fatalf("windows until and since %s:\n%s\n%s", at, before, after)
	}
	res, err = auditchain.ReadJSONL(bytes.NewReader(after), &auditchain.Verifier{})
	if err != nil || res.Broken != nil || res.First < 2 || res.Head.Seq != int64(n) {
		t.Fatalf("a window on its own: %+v %v", res, res.Broken)
	}
	if empty, _ := exportAll(t, f, dashboard, url.Values{"since": {"2999-01-01T00:00:00Z"}}); len(empty) != 0 {
		t.Fatalf("a window after the last record: %s", empty)
	}

	for query, field := range map[string]string{
		"since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z": "until",
		"since=yesterday":     "since",
		"cursor=%21":          "cursor",
		"cursor=bm90LWEtc2Vx": "cursor", // base64 of not-a-seq
		"limit=0":             "limit",
		"limit=10001":         "limit",
		"after=1":             "after",
	} {
		r := f.do(t, "GET", "/api/v1/audit-logs/export?"+query, dashboard, nil)
		r.wantProblem(t, 422, apitypes.CodeValidationFailed)
		if len(r.problem.Errors) == 0 || r.problem.Errors[0].Field != field {
			t.Errorf("?%s: %+v", query, r.problem.Errors)
		}
	}
	// The chain is every app's: one app's credentials, and a dashboard key restricted to
	// some wallets, do not read it.
	restricted := f.newKey(t, f.creds.Keys["treasury"].SK, `{"kind":"tk","actions":["read"],"resourceIds":["`+f.creds.Wallets[0].ID+`"]}`)
	for _, token := range []string{f.creds.Keys["pay"].SK, f.creds.Keys["pay"].Read, restricted.Secret} {
		for _, path := range []string{"/api/v1/audit-logs/export", "/api/v1/audit-logs/verify"} {
			f.do(t, "GET", path, token, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
		}
	}
}

// Rows edited, deleted and reordered behind the service's back are found, at the entry
// where the chain breaks, by the service's check of the stored chain and by an offline
// check of an export alike.
func TestAuditChainTamperingIsFoundAtTheRightEntry(t *testing.T) {
	storetest.ForEachDialectWithSQL(t, func(t *testing.T, s *store.Store, db *sql.DB) {
		ctx := context.Background()
		f := newFixtureOn(t, s)
		dashboard, org := f.creds.Keys["treasury"].Read, f.creds.OrgID
		// The seeding's records come first; the six payments' follow, seq o+2 to o+7.
		o := verifyAnswer(t, f, dashboard).Head.Seq - 1
		auditPayments(t, f, 6)
		head := verifyAnswer(t, f, dashboard).Head
		if head == nil || head.Seq != o+7 {
			t.Fatalf("head %+v", head)
		}
		rows, err := s.AuditChain(ctx, org, 0, o+7, int(o)+7)
		if err != nil {
			t.Fatal(err)
		}
		idAt := map[int64]string{}
		for _, r := range rows {
			idAt[r.Seq] = r.ID
		}
		exec := func(query string, args ...any) {
			t.Helper()
			if _, err := db.ExecContext(ctx, query, append([]any{org}, args...)...); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		}
		exec(`CREATE TABLE audit_kept AS SELECT * FROM audit_logs WHERE org_id = $1`)

		for _, c := range []struct {
			name   string
			tamper func()
			seq    int64
			id     string
			reason auditchain.Reason
		}{
			{"details edited", func() {
				exec(`UPDATE audit_logs SET details = '{"amount":"5000000"}' WHERE org_id = $1 AND seq = $2`, o+3)
			}, o + 3, idAt[o+3], auditchain.HashMismatch},
			{"a row deleted", func() {
				exec(`DELETE FROM audit_logs WHERE org_id = $1 AND seq = $2`, o+5)
			}, o + 6, idAt[o+6], auditchain.SeqGap},
			{"two rows reordered", func() {
				exec(`UPDATE audit_logs SET seq = -1 WHERE org_id = $1 AND seq = $2`, o+3)
				exec(`UPDATE audit_logs SET seq = $2 WHERE org_id = $1 AND seq = $3`, o+3, o+4)
				exec(`UPDATE audit_logs SET seq = $2 WHERE org_id = $1 AND seq = -1`, o+4)
			}, o + 3, idAt[o+4], auditchain.HashMismatch},
			{"a row edited and rehashed", func() {
				a := rows[o+2]
				a.Action = "nothing.happened"
				e := a.ChainEntry()
				hash, _ := auditchain.Hash(&e)
				exec(`UPDATE audit_logs SET action = $2, hash = $3 WHERE org_id = $1 AND seq = $4`, a.Action, hash, o+3)
			}, o + 4, idAt[o+4], auditchain.PrevHashMismatch},
			{"the last row deleted", func() {
				exec(`DELETE FROM audit_logs WHERE org_id = $1 AND seq = $2`, o+7)
			}, o + 7, "", auditchain.HeadMismatch},
		} {
			t.Run(c.name, func(t *testing.T) {
				c.tamper()
				check := verifyAnswer(t, f, dashboard)
				if b := check.FirstBroken; check.Intact || b == nil || b.Seq != c.seq || b.ID != c.id || b.Reason != c.reason {
					t.Errorf("the service's check: %+v %+v; want seq %d %q %s", check, b, c.seq, c.id, c.reason)
				}
				// Offline, the export is checked against the head kept from before.
				export, _ := exportAll(t, f, dashboard, url.Values{})
				res, err := auditchain.ReadJSONL(bytes.NewReader(export), &auditchain.Verifier{FromGenesis: true, Want: head})
				if b := res.Broken; err != nil || b == nil || b.Seq != c.seq || b.ID != c.id || b.Reason != c.reason {
					t.Errorf("the export's check: %+v %+v %v; want seq %d %q %s", res, b, err, c.seq, c.id, c.reason)
				}
				exec(`DELETE FROM audit_logs WHERE org_id = $1`)
				exec(`INSERT INTO audit_logs SELECT * FROM audit_kept WHERE org_id = $1`)
				if check := verifyAnswer(t, f, dashboard); !check.Intact || check.Entries != o+7 {
					t.Fatalf("restored, the chain is not intact: %+v %+v", check, check.FirstBroken)
				}
			})
		}
	})
}

// inlineAuditVerifications runs a verification's pages at once, as its workflow would.
type inlineAuditVerifications struct{ acts *activities.Audit }

func (r inlineAuditVerifications) StartAuditVerification(ctx context.Context, id string) error {
	for {
		p, err := r.acts.VerifyAuditPage(ctx, workflows.AuditVerificationInput{VerificationID: id})
		if err != nil || p.Done {
			return err
		}
	}
}

func startVerification(t *testing.T, f *fixture, token string) apitypes.AuditVerification {
	t.Helper()
	r := f.do(t, "POST", "/api/v1/audit-logs/verifications", token, nil)
	var v apitypes.AuditVerification
	if err := json.Unmarshal(r.body, &v); err != nil || r.status != 202 || r.header.Get("Location") != "/api/v1/audit-logs/verifications/"+v.ID {
		t.Fatalf("start: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	r = f.do(t, "GET", "/api/v1/audit-logs/verifications/"+v.ID, token, nil)
	if err := json.Unmarshal(r.body, &v); err != nil || r.status != 200 {
		t.Fatalf("read: %d %s", r.status, r.body)
	}
	return v
}

// A verification in the background, a page at a time, finds what the check within a
// request finds: the chain intact to its head, or its first broken entry.
func TestTheWholeChainIsVerifiedInTheBackground(t *testing.T) {
	storetest.ForEachDialectWithSQL(t, func(t *testing.T, s *store.Store, db *sql.DB) {
		f := newFixtureOn(t, s)
		auditPayments(t, f, 6)
		dashboard, org := f.creds.Keys["treasury"].Read, f.creds.OrgID
		within := verifyAnswer(t, f, dashboard)
		v := startVerification(t, f, dashboard)
		if v.Status != "intact" || v.Head == nil || *v.Head != *within.Head || v.Entries != within.Entries || v.Checked != within.Head.Seq ||
			v.FirstBroken != nil || v.CompletedAt == nil || v.CreatedBy == nil || *v.CreatedBy == "" {
			t.Fatalf("verification %+v; the check within a request %+v", v, within)
		}
		// An entry edited behind the service's back, past the first pages.
		at := within.Head.Seq - 2
		if _, err := db.ExecContext(t.Context(), `UPDATE audit_logs SET details = '{"amount":"5000000"}' WHERE org_id = $1 AND seq = $2`, org, at); err != nil {
			t.Fatal(err)
		}
		v = startVerification(t, f, dashboard)
		b := v.FirstBroken
		if v.Status != "broken" || b == nil || b.Seq != at || b.Reason != "hash_mismatch" || v.Entries != at {
			t.Fatalf("the edited chain: %+v %+v", v, b)
		}
		if within := verifyAnswer(t, f, dashboard); within.FirstBroken == nil || *within.FirstBroken != *b {
			t.Fatalf("the check within a request found %+v, the verification %+v", within.FirstBroken, b)
		}
		// Like the export: no other app's credential, nor a restricted one; no other
		// organisation's verification, nor an unknown one.
		restricted := f.newKey(t, f.creds.Keys["treasury"].SK, `{"kind":"tk","actions":["read"],"resourceIds":["`+f.creds.Wallets[0].ID+`"]}`)
		for _, token := range []string{f.creds.Keys["pay"].SK, f.creds.Keys["pay"].Read, restricted.Secret} {
			f.do(t, "POST", "/api/v1/audit-logs/verifications", token, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
			f.do(t, "GET", "/api/v1/audit-logs/verifications/"+v.ID, token, nil).wantProblem(t, 403, apitypes.CodePermissionDenied)
		}
		now := time.Now().UTC()
		theirs := &store.AuditVerification{ID: ids.New(ids.AuditVerification), OrgID: f.creds.OtherOrg.OrgID, Status: store.AuditVerificationIntact,
			Creator: store.Creator{CreatedBy: "test"}, CreatedAt: now, UpdatedAt: now, CompletedAt: &now}
		if err := s.CreateAuditVerification(t.Context(), theirs); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{theirs.ID, ids.New(ids.AuditVerification)} {
			f.do(t, "GET", "/api/v1/audit-logs/verifications/"+id, dashboard, nil).wantProblem(t, 404, apitypes.CodeNotFound)
		}
	})
}
