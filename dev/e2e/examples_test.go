package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opentreasury/treasury/dev/wait"
)

// exampleProcess is one example program started by the test. Its output may be read
// once done is closed.
type exampleProcess struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

func (p *exampleProcess) exitCode() int {
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// report is what a failure message shows of a process: its output, which by design
// holds no secret.
func (p *exampleProcess) report() string {
	return p.name + ": " + p.errText() + "\nstdout:\n" + p.stdout.String() + "stderr:\n" + p.stderr.String()
}

func (p *exampleProcess) errText() string {
	if p.err == nil {
		return "exit 0"
	}
	return p.err.Error()
}

// buildExamples compiles the example programs the way their README says, into one
// directory, and returns it.
func buildExamples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"./examples/payout-job", "./examples/approvals-bot", "./examples/dashboard", "./examples/policy-review", "./examples/payroll")
	build.Dir = "../.." // the module root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the examples: %v\n%s", err, out)
	}
	return dir
}

// startExample runs an example with its credential in the environment (as its README
// suggests: out of the process list) and nothing else of the test's TREASURY_ variables.
func startExample(t *testing.T, dir, name string, secrets map[string]string, args ...string) *exampleProcess {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p := &exampleProcess{name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, filepath.Join(dir, name), args...)
	p.cmd.WaitDelay = 5 * time.Second
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TREASURY_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	for k, v := range secrets {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		cancel()
		close(p.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-p.done
	})
	return p
}

func (p *exampleProcess) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not end within %s\n%s", p.name, limit, p.report())
	}
}

// TestExamplesRunWithLeastPrivilege runs the three example integrations as an integrator
// would, each with the narrowest credential SPEC section 1 names, through one payment
// that needs an approval, and checks that each credential is refused beyond its job.
func TestExamplesRunWithLeastPrivilege(t *testing.T) {
	bins := buildExamples(t)
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay, treasury := b.Credentials.Keys["pay"], b.Credentials.Keys["treasury"]
	const to = "0x2222222222222222222222222222222222222222"

	// The payout job's OAuth client: read and write on pay, nothing else.
	r := send(t, "POST", b.APIURL+"/developer/oauth-clients", pay.SK, `{"scopes":"pay:read pay:write","label":"payout job"}`)
	clientID, _ := r.body["clientId"].(string)
	clientSecret, _ := r.body["clientSecret"].(string)
	if r.status != http.StatusCreated || clientID == "" || clientSecret == "" {
		t.Fatalf("create the OAuth client: HTTP %d", r.status) // the body holds the secret
	}

	// 20,000 USD: the seeded policy asks for one approval from 10,000 USD. The job is not
	// told its wallet: it lists the organisation's with its pay credential and pays from
	// the first on ethereum.
	job := startExample(t, bins, "payout-job",
		map[string]string{"TREASURY_CLIENT_ID": clientID, "TREASURY_CLIENT_SECRET": clientSecret},
		"--url", b.APIURL, "--amount", "20000", "--to", to, "--timeout", "90s", "--idempotency-key", "least-privilege-1")

	var itemID string
	wait.For(t, 30*time.Second, "the payout job's approval to be pending", func() bool {
		r := call(t, "GET", api+"/approvals?status=pending", pay.Approve)
		if items, _ := r.body["data"].([]any); r.status == http.StatusOK && len(items) == 1 {
			itemID, _ = items[0].(map[string]any)["id"].(string)
			return true
		}
		select {
		case <-job.done:
			t.Fatalf("the payout job ended before its approval was pending\n%s", job.report())
		default:
		}
		return false
	})

	// The bot signs its decision with the seeded approver key of its token.
	approverKey := b.Credentials.ApproverKeys["pay"].Approve
	bot := startExample(t, bins, "approvals-bot", map[string]string{"TREASURY_TOKEN": pay.Approve,
		"TREASURY_APPROVER_KEY_ID": approverKey.KeyID, "TREASURY_APPROVER_KEY": approverKey.PrivateKey},
		"--url", b.APIURL, "--once", "--approve-up-to", "50000")
	bot.wait(t, 30*time.Second)
	if bot.exitCode() != 0 || !strings.Contains(bot.stdout.String(), itemID) ||
		!strings.Contains(bot.stdout.String(), "APPROVE (signed with "+approverKey.KeyID+"): item now approved") {
		t.Fatalf("the approvals bot did not approve %s with a signature\n%s", itemID, bot.report())
	}
	items := call(t, "GET", api+"/approvals?status=all", pay.Read)
	type decided struct {
		ID        string
		Decisions []struct{ KeyID, Signature string }
	}
	var page struct{ Data []decided }
	if err := json.Unmarshal(items.raw, &page); err != nil {
		t.Fatal(err)
	}
	signed := slices.ContainsFunc(page.Data, func(it decided) bool {
		return it.ID == itemID && len(it.Decisions) == 1 && it.Decisions[0].KeyID == approverKey.KeyID && it.Decisions[0].Signature != ""
	})
	if !signed {
		t.Fatalf("item %s's decision does not carry the bot's signature: %s", itemID, items.raw)
	}

	job.wait(t, 60*time.Second)
	if job.exitCode() != 0 || !regexp.MustCompile(`^0x[0-9a-f]{64}\n$`).MatchString(job.stdout.String()) {
		t.Fatalf("the payout job did not end confirmed with a transaction hash\n%s", job.report())
	}
	t.Logf("payout job: confirmed, tx %s", strings.TrimSpace(job.stdout.String()))

	// Run again with the same key, as after a crash: the same order, said to be replayed,
	// reported from its history with the same transaction.
	rerun := startExample(t, bins, "payout-job",
		map[string]string{"TREASURY_CLIENT_ID": clientID, "TREASURY_CLIENT_SECRET": clientSecret},
		"--url", b.APIURL, "--amount", "20000", "--to", to, "--timeout", "30s", "--idempotency-key", "least-privilege-1")
	rerun.wait(t, 30*time.Second)
	if rerun.exitCode() != 0 || rerun.stdout.String() != job.stdout.String() ||
		!strings.Contains(rerun.stderr.String(), "replayed: ") || regexp.MustCompile(`(?m)^(created|submitted) `).MatchString(rerun.stderr.String()) {
		t.Fatalf("the rerun with the same key did not replay the same payment\n%s", rerun.report())
	}

	// The balance falls only at the next balance sync, so any total will do.
	dash := startExample(t, bins, "dashboard", map[string]string{"TREASURY_TOKEN": treasury.Read}, "--url", b.APIURL)
	dash.wait(t, 30*time.Second)
	out := dash.stdout.String()
	if dash.exitCode() != 0 || !regexp.MustCompile(`(?m)^Total +[0-9]+\.[0-9]{2} USD +6 wallets`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Positions \([1-9][0-9]*\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Audit log \(newest [1-9][0-9]*\)$`).MatchString(out) ||
		!regexp.MustCompile(`approval\.approve +approval_item `+itemID).MatchString(out) {
		t.Fatalf("the dashboard lacks the total, the positions or the audit entries\n%s", dash.report())
	}

	// The payout job again, hearing of the outcome from a webhook of pay (made by a
	// developer with the pay sk) instead of polling the events.
	hookAddr := freeAddr(t)
	r = send(t, "POST", b.APIURL+"/developer/webhooks", pay.SK, `{"url":"http://`+hookAddr+`/hooks","events":["order.*"]}`)
	hookSecret, _ := r.body["secret"].(string)
	if r.status != http.StatusCreated || hookSecret == "" {
		t.Fatalf("create the webhook: HTTP %d", r.status)
	}
	hooked := startExample(t, bins, "payout-job",
		map[string]string{"TREASURY_CLIENT_ID": clientID, "TREASURY_CLIENT_SECRET": clientSecret, "TREASURY_WEBHOOK_SECRET": hookSecret},
		"--url", b.APIURL, "--wallet", b.Credentials.Wallets[0].ID, "--amount", "25", "--to", to, "--timeout", "60s",
		"--webhook-listen", hookAddr)
	hooked.wait(t, 60*time.Second)
	if hooked.exitCode() != 0 || !regexp.MustCompile(`^0x[0-9a-f]{64}\n$`).MatchString(hooked.stdout.String()) ||
		!strings.Contains(hooked.stderr.String(), "listening for webhook messages") {
		t.Fatalf("the payout job on webhooks did not end confirmed\n%s", hooked.report())
	}

	// A proposed policy, tried on the orders above before anyone publishes it: the payouts
	// of 25 USD it would refuse.
	r = send(t, "POST", b.APIURL+"/developer/api-keys", pay.SK, `{"kind":"tk","actions":["developer"]}`)
	developerKey, _ := r.body["secret"].(string)
	if r.status != http.StatusCreated || developerKey == "" {
		t.Fatalf("create the developer key: HTTP %d", r.status)
	}
	rulesFile := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(rulesFile, []byte(`{"maxOrderUsd":"20","approvalTiers":[{"minUsd":"10","quorum":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	review := startExample(t, bins, "policy-review", map[string]string{"TREASURY_TOKEN": developerKey},
		"--url", b.APIURL, "--app", "pay", "--rules", rulesFile, "--days", "1")
	review.wait(t, 60*time.Second)
	out = review.stdout.String()
	if review.exitCode() != 0 || !regexp.MustCompile(`(?m)^Draft pdr_[0-9a-f]+ of the pay policy`).MatchString(out) ||
		!strings.Contains(out, "maxOrderUsd changed from") ||
		!regexp.MustCompile(`(?m)^ +[1-9][0-9]* +would be refused \(were let through\)$`).MatchString(out) ||
		!strings.Contains(out, "/api/v1/payments/ord_") {
		t.Fatalf("the policy review did not report the payouts it would refuse\n%s", review.report())
	}
	if r := call(t, "GET", api+"/policies/pay", pay.SK); r.body["version"] != float64(1) {
		t.Errorf("the review published the policy: %v", r.body["version"])
	}

	// Least privilege: each credential is refused what its program does not do.
	denied := func(what string, r reply) {
		t.Helper()
		if r.status != http.StatusForbidden || r.body["code"] != "permission_denied" {
			t.Errorf("%s: HTTP %d %s, want 403 permission_denied", what, r.status, r.raw)
		}
	}
	denied("the bot's approve key creating a payment", send(t, "POST", api+"/payments", pay.Approve,
		`{"walletId":"`+b.Credentials.Wallets[0].ID+`","asset":"USDC","amount":"1","destination":{"address":"`+to+`"}}`))
	denied("the dashboard's read key listing payments", call(t, "GET", api+"/payments", treasury.Read))
	denied("the policy review's developer key creating a payment", send(t, "POST", api+"/payments", developerKey,
		`{"walletId":"`+b.Credentials.Wallets[0].ID+`","asset":"USDC","amount":"1","destination":{"address":"`+to+`"}}`))
	denied("the payout job's OAuth token deciding an approval", send(t, "POST", api+"/approvals/payment/"+itemID+"/decide",
		oauthToken(t, api, clientID, clientSecret), `{"decision":"APPROVE"}`))
}

// oauthToken fetches an access token for the client, as the payout job does.
func oauthToken(t *testing.T, api, id, secret string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"pay:read pay:write"}}
	req, err := http.NewRequest("POST", api+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(res.Body).Decode(&tok); err != nil || res.StatusCode != http.StatusOK || tok.AccessToken == "" {
		t.Fatalf("OAuth token: HTTP %d", res.StatusCode) // the body would hold the token
	}
	return tok.AccessToken
}

// TestPayoutFileSurvivesAKill pays a CSV file of payouts with the payout job, kills the
// job with SIGKILL once some payments exist, and runs it again on the same file: every row
// is paid exactly once (one payment per reference, broadcast once, confirmed), and the
// second run's report accounts for every row.
func TestPayoutFileSurvivesAKill(t *testing.T) {
	bins := buildExamples(t)
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"].SK
	const rows = 40

	csvPath := payoutsFile(t, rows, func(i int) string {
		return fmt.Sprintf("batch-%02d,%s,USDC,%d.25,0x1111111111111111111111111111111111111111", i, b.Credentials.Wallets[0].ID, i)
	})
	secrets := map[string]string{"TREASURY_TOKEN": pay}
	args := []string{"--url", b.APIURL, "--csv", csvPath, "--concurrency", "2", "--timeout", "90s"}

	// payments lists the pay app's payments by reference.
	payments := func() map[string][]map[string]any {
		out := map[string][]map[string]any{}
		after := ""
		for {
			r := call(t, "GET", api+"/payments?limit=200"+after, pay)
			for _, o := range r.body["data"].([]any) {
				o := o.(map[string]any)
				ref, _ := o["reference"].(string)
				out[ref] = append(out[ref], o)
			}
			next, _ := r.body["nextCursor"].(string)
			if next == "" {
				return out
			}
			after = "&after=" + url.QueryEscape(next)
		}
	}

	first := startExample(t, bins, "payout-job", secrets, args...)
	made := 0
	wait.For(t, 30*time.Second, "the payout job to make a quarter of the payments", func() bool {
		made = len(payments())
		return made >= rows/4
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.done
	t.Logf("killed the payout job with %d of %d payments made", made, rows)

	second := startExample(t, bins, "payout-job", secrets, args...)
	second.wait(t, 90*time.Second)
	if second.exitCode() != 0 {
		t.Fatalf("the rerun did not confirm every payout\n%s", second.report())
	}
	report := strings.Split(strings.TrimSpace(second.stdout.String()), "\n")
	if len(report) != rows+1 || report[0] != "reference,order_id,status,tx_hash,detail" {
		t.Fatalf("the report has %d lines\n%s", len(report), second.report())
	}
	reported := map[string]string{}
	for _, line := range report[1:] {
		f := strings.Split(line, ",")
		if len(f) != 5 || f[2] != "confirmed" || !regexp.MustCompile(`^0x[0-9a-f]{64}$`).MatchString(f[3]) {
			t.Fatalf("report line %q", line)
		}
		reported[f[0]] = f[1]
	}

	byReference := payments()
	for i := 1; i <= rows; i++ {
		ref := fmt.Sprintf("batch-%02d", i)
		list := byReference[ref]
		if len(list) != 1 {
			t.Fatalf("%s was paid %d times", ref, len(list))
		}
		o := list[0]
		if o["status"] != "confirmed" || o["id"] != reported[ref] || o["amount"] != fmt.Sprintf("%d.25", i) {
			t.Fatalf("%s: %v (reported %s)", ref, o, reported[ref])
		}
		r := call(t, "GET", api+"/events?limit=200&orderId="+o["id"].(string), pay)
		broadcasts := 0
		for _, ev := range r.body["data"].([]any) {
			if ev.(map[string]any)["event"] == "Order.Broadcast" {
				broadcasts++
			}
		}
		if broadcasts != 1 {
			t.Fatalf("%s was broadcast %d times", ref, broadcasts)
		}
	}
}

// TestThePayoutJobPaysAFileAsOneBatch: with --batch the payout job pays a file's rows of one
// wallet as one batch payment, one order and one transaction, and reports every row from
// its own recipient on the order; a rerun finds the same order instead of paying again.
func TestThePayoutJobPaysAFileAsOneBatch(t *testing.T) {
	bins := buildExamples(t)
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"].SK
	const rows = 6
	csvPath := payoutsFile(t, rows, func(i int) string {
		return fmt.Sprintf("run-%02d,%s,USDC,%d.5,0x%s", i, b.Credentials.Wallets[0].ID, i, strings.Repeat(fmt.Sprint(1+i%2), 40))
	})
	args := []string{"--url", b.APIURL, "--csv", csvPath, "--batch", "--timeout", "60s"}
	secrets := map[string]string{"TREASURY_TOKEN": pay}
	var reports []string
	for range 2 {
		job := startExample(t, bins, "payout-job", secrets, args...)
		job.wait(t, 60*time.Second)
		if job.exitCode() != 0 {
			t.Fatalf("the batch payout job did not confirm every row\n%s", job.report())
		}
		reports = append(reports, job.stdout.String())
	}
	if reports[0] != reports[1] {
		t.Fatalf("the rerun reported otherwise:\n%s\n%s", reports[0], reports[1])
	}
	lines := strings.Split(strings.TrimSpace(reports[0]), "\n")
	if len(lines) != rows+1 {
		t.Fatalf("report:\n%s", reports[0])
	}
	first := strings.Split(lines[1], ",")
	for i, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) != 5 || f[0] != fmt.Sprintf("run-%02d", i+1) || f[1] != first[1] || f[2] != "confirmed" || f[3] != first[3] ||
			!regexp.MustCompile(`^0x[0-9a-f]{64}$`).MatchString(f[3]) {
			t.Fatalf("report line %q: every row is the one order's recipient, confirmed in its one transaction", line)
		}
	}
	o := call(t, "GET", api+"/payments/"+first[1], pay).body
	if o["amount"] != "24" || len(o["recipients"].([]any)) != rows || len(o["legs"].([]any)) != 1 {
		t.Fatalf("the batch order: %v", o)
	}
	if list := call(t, "GET", api+"/payments?limit=200", pay).body["data"].([]any); len(list) != 1 {
		t.Fatalf("%d payments: the file and its rerun make one", len(list))
	}
}

// The payroll example schedules its team's batch (every 2 s here instead of monthly): each
// run pays the whole team in one order, confirmed; its runs list those orders; deleted, it
// runs no more.
func TestThePayrollExampleSchedulesTheTeamsBatch(t *testing.T) {
	bins := buildExamples(t)
	b := startBundle(t, t.TempDir(), "")
	defer func() { _ = b.Shutdown() }()
	api := b.APIURL + "/api/v1"
	pay := b.Credentials.Keys["pay"]
	team := filepath.Join(t.TempDir(), "team.csv")
	if err := os.WriteFile(team, []byte("address,amount,reference\n0x"+strings.Repeat("1", 40)+",1000,alice\n0x"+strings.Repeat("2", 40)+",1250.5,bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"TREASURY_TOKEN": pay.SK}
	create := startExample(t, bins, "payroll", secrets, "create", "--url", b.APIURL, "--csv", team, "--wallet", b.Credentials.Wallets[0].ID, "--every", "PT2S")
	create.wait(t, 30*time.Second)
	id := strings.TrimSpace(create.stdout.String())
	if create.exitCode() != 0 || !strings.HasPrefix(id, "pys_") {
		t.Fatalf("payroll create\n%s", create.report())
	}
	var orderID string
	wait.For(t, time.Minute, "a run of the payroll to make its order", func() bool {
		runs := call(t, "GET", api+"/payout-schedules/"+id+"/runs", pay.Read).body["data"].([]any)
		if len(runs) == 0 {
			return false
		}
		orderID, _ = runs[len(runs)-1].(map[string]any)["orderId"].(string)
		return orderID != ""
	})
	o := waitStatus(t, api+"/payments/"+orderID, pay.Read, "confirmed")
	if o["amount"] != "2250.5" || len(o["recipients"].([]any)) != 2 || o["scheduleId"] != id {
		t.Fatalf("the payroll's order: %v", o)
	}
	list := startExample(t, bins, "payroll", secrets, "runs", "--url", b.APIURL, id)
	list.wait(t, 30*time.Second)
	if list.exitCode() != 0 || !strings.Contains(list.stdout.String(), orderID+"\tconfirmed") {
		t.Fatalf("payroll runs\n%s", list.report())
	}
	del := startExample(t, bins, "payroll", secrets, "delete", "--url", b.APIURL, id)
	del.wait(t, 30*time.Second)
	if del.exitCode() != 0 {
		t.Fatalf("payroll delete\n%s", del.report())
	}
	if r := call(t, "GET", api+"/payout-schedules/"+id, pay.Read); r.status != 404 {
		t.Fatalf("the deleted payroll: %d", r.status)
	}
}

// payoutsFile writes a payout job's CSV file of rows lines, line(1) … line(rows), under the
// header reference,wallet,asset,amount,to, and returns its path.
func payoutsFile(t *testing.T, rows int, line func(i int) string) string {
	t.Helper()
	var file strings.Builder
	file.WriteString("reference,wallet,asset,amount,to\n")
	for i := 1; i <= rows; i++ {
		file.WriteString(line(i) + "\n")
	}
	path := filepath.Join(t.TempDir(), "payouts.csv")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
