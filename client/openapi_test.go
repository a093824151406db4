package client_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/docs/openapicheck"
)

// recorder answers every request with a body each method can read, and keeps the requests.
type recorder struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.requests = append(rec.requests, r.Clone(context.Background()))
	rec.bodies = append(rec.bodies, body)
	rec.mu.Unlock()
	if r.URL.Path == "/api/v1/sessions" || r.URL.Path == "/api/v1/session/password" {
		http.SetCookie(w, &http.Cookie{Name: "treasury_session", Value: "s1"})
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"access_token":"at_1","expires_in":900,"data":[],"nextCursor":null,"csrfToken":"c1"}`)
}

// Every operation of docs/openapi.json is reached by some method of the client, and every
// request the client sends is one the document describes and accepts.
func TestTheClientCoversTheOpenAPIDocument(t *testing.T) {
	check, err := openapicheck.New()
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	fast := client.WithRetryPolicy(client.RetryPolicy{Attempts: 1})
	key, err := client.New(srv.URL, client.WithToken("sk_test"), fast)
	if err != nil {
		t.Fatal(err)
	}
	oauth, err := client.New(srv.URL, client.WithClientCredentials("oac_1", "ocs_1", "pay:read"), fast)
	if err != nil {
		t.Fatal(err)
	}
	person, err := client.New(srv.URL, client.WithSession("owner@example.com", "a long password"), client.WithApp("pay"), fast)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ignore := func(...any) {}
	payment := client.PaymentRequest{WalletID: "wal_1", Asset: "USDC", Amount: "500",
		Destination: client.Destination{Address: "0x1111111111111111111111111111111111111111", Label: "Supplier"}, Reference: "r"}
	trade := client.TradeRequest{WalletID: "wal_1", SellAsset: "ETH", BuyAsset: "USDC", SellAmount: "1.5", MaxSlippageBps: 50}
	earn := client.EarnRequest{WalletID: "wal_1", Protocol: "aave", Action: client.EarnDeposit, Asset: "USDC", Amount: "100"}
	borrow := client.BorrowRequest{WalletID: "wal_1", Protocol: "aave", Action: client.BorrowDraw, Asset: "USDC", Amount: "100",
		CollateralAsset: "ETH"}
	since := time.Date(2026, 11, 22, 1, 24, 34, 123e6, time.UTC)
	page := client.ListOptions{Limit: 10, Cursor: "Y3Vyc29y"}

	// Sessions and health.
	ignore(person.SignIn(ctx))
	ignore(person.Session(ctx))
	ignore(person.ChangePassword(ctx, "a long password", "a longer password"))
	ignore(person.SignOut(ctx))
	ignore(key.Health(ctx), key.Ready(ctx))
	ignore(key.OpenAPI(ctx))
	ignore(oauth.Portfolio(ctx)) // fetches a token first

	// Treasury.
	ignore(key.Portfolio(ctx))
	ignore(key.ListWallets(ctx, page))
	ignore(key.ListWalletRefs(ctx, page))
	ignore(key.ListPositions(ctx, page))
	ignore(key.WalletChallenge(ctx, "ethereum", "0x1111111111111111111111111111111111111111"))
	ignore(key.RegisterWallet(ctx, client.WalletRegistration{Chain: "ethereum", Address: "0x1111111111111111111111111111111111111111",
		Label: "Operating", ChallengeID: "wch_1", Signature: "0x00"}))
	ignore(key.RelabelWallet(ctx, "wal_1", "Payroll"))
	ignore(key.ArchiveWallet(ctx, "wal_1"))

	// Orders of every domain.
	for _, req := range []client.OrderRequest{payment, trade, earn, borrow} {
		o, _ := key.CreateOrder(ctx, req)
		ignore(o)
		ignore(key.EvaluatePolicy(ctx, req))
	}
	for _, d := range []client.Domain{client.DomainPayment, client.DomainTrade, client.DomainEarn, client.DomainBorrow} {
		ignore(key.ListOrders(ctx, d, client.OrderFilter{Status: "draft", CreatedAfter: since, Limit: 10, Cursor: "Y3Vyc29y"}))
		ignore(key.GetOrder(ctx, d, "ord_1"))
		ignore(key.SubmitOrder(ctx, d, "ord_1"))
	}

	// Payout schedules.
	ignore(key.CreatePayoutSchedule(ctx, client.PayoutScheduleRequest{Payment: payment, Every: "P1D", StartAt: since, EndAt: since.Add(time.Hour)}))
	ignore(key.CreatePayoutSchedule(ctx, client.PayoutScheduleRequest{Payment: payment, Cron: "0 9 1 * *", Timezone: "Europe/Paris"}))
	ignore(key.ListPayoutSchedules(ctx, page))
	ignore(key.GetPayoutSchedule(ctx, "pys_1"))
	ignore(key.PausePayoutSchedule(ctx, "pys_1", true))
	ignore(key.DeletePayoutSchedule(ctx, "pys_1"))
	ignore(key.ListPayoutRuns(ctx, "pys_1", page))

	// Approvals, signing, records, policies.
	ignore(key.ListApprovals(ctx, client.ApprovalFilter{Domain: client.DomainPayment, Status: "pending", Limit: 10}))
	ignore(key.DecideApproval(ctx, client.DomainPayment, "apr_1", client.Decision{Decision: client.Approve, Comment: "ok"}))
	ignore(key.ListSigningRequests(ctx, client.SigningRequestFilter{Status: "pending", Limit: 10}))
	ignore(key.GetSigningRequest(ctx, "sig_1"))
	ignore(key.SubmitSignature(ctx, "sig_1", make([]byte, 64)))
	ignore(key.RefuseSigningRequest(ctx, "sig_1", "destination_not_allowed", "0x2222 is not an allowed destination"))
	ignore(key.ListApproverKeys(ctx, page))
	ignore(key.ListEvents(ctx, client.EventFilter{OrderID: "ord_1", Cursor: "evt_1", Limit: 10}))
	ignore(key.ListAuditLogs(ctx, page))
	ignore(key.ExportAuditLog(ctx, client.AuditExportOptions{Since: since, Until: since.Add(time.Hour), Limit: 10}, io.Discard))
	ignore(key.VerifyAuditChain(ctx))
	ignore(key.StartAuditVerification(ctx))
	ignore(key.AuditVerification(ctx, "avf_1"))
	window := client.PolicyWindow{Scope: "destination", Hours: 168, LimitUSD: "1000000.50"}
	rules := client.PolicyRules{MaxOrderUSD: "5000000", DailyVolumeUSD: "20000000",
		DestinationWhitelist: []string{"0x1111111111111111111111111111111111111111"}, AllowedPairs: [][2]string{{"ETH", "USDC"}},
		DeniedPairs: [][2]string{{"WBTC", "USDC"}}, AllowedProtocols: []string{"aave"}, ChangeApprovals: 1,
		ApprovalTiers: []client.ApprovalTier{{MinUSD: "10000", Quorum: 1}}, Windows: []client.PolicyWindow{window}}
	ignore(key.GetPolicy(ctx, "pay"))
	ignore(key.PutPolicy(ctx, "pay", rules))
	ignore(key.EvaluatePolicyAgainst(ctx, payment, client.PolicyTarget{Version: 2}))
	ignore(key.EvaluatePolicyAgainst(ctx, payment, client.PolicyTarget{DraftID: "pdr_1"}))
	ignore(key.ListPolicyVersions(ctx, "pay", page))
	ignore(key.GetPolicyVersion(ctx, "pay", 2))
	ignore(key.RollbackPolicy(ctx, "pay", 1))
	ignore(key.CreatePolicyDraft(ctx, "pay", client.PolicyDraftRequest{Rules: &rules}))
	ignore(key.CreatePolicyDraft(ctx, "pay", client.PolicyDraftRequest{FromVersion: 1}))
	ignore(key.ListPolicyDrafts(ctx, "pay", client.PolicyDraftFilter{Status: client.PolicyDraftOpen, ListOptions: page}))
	ignore(key.GetPolicyDraft(ctx, "pay", "pdr_1"))
	ignore(key.UpdatePolicyDraft(ctx, "pay", "pdr_1", rules))
	ignore(person.ApprovePolicyDraft(ctx, "pay", "pdr_1"))
	ignore(key.PublishPolicyDraft(ctx, "pay", "pdr_1"))
	ignore(key.DiscardPolicyDraft(ctx, "pay", "pdr_1"))
	ignore(key.GetPolicyWindows(ctx, "pay"))
	ignore(key.StartPolicyDryRun(ctx, "pay", client.PolicyDryRunRequest{DraftID: "pdr_1", Days: 7, Examples: 3}))
	ignore(key.StartPolicyDryRun(ctx, "pay", client.PolicyDryRunRequest{DraftID: "pdr_1"}))
	ignore(key.GetPolicyDryRun(ctx, "pay", "pdx_1"))

	// The developer surface.
	ignore(key.ListAPIKeys(ctx, page))
	ignore(key.CreateAPIKey(ctx, client.APIKeyRequest{Kind: "tk", Actions: []string{"read"}, ResourceIDs: []string{"wal_1"}, Label: "l"}))
	ignore(key.GetAPIKey(ctx, "key_1"))
	ignore(key.RevokeAPIKey(ctx, "key_1"))
	ignore(key.ListOAuthClients(ctx, page))
	ignore(key.CreateOAuthClient(ctx, client.OAuthClientRequest{Scopes: "pay:read", Label: "l"}))
	ignore(key.GetOAuthClient(ctx, "oac_1"))
	ignore(key.RevokeOAuthClient(ctx, "oac_1"))
	ignore(key.ListTeamMembers(ctx, page))
	ignore(person.AddTeamMember(ctx, "invited@example.com", []string{"read"}))
	ignore(person.SetTeamMemberActions(ctx, "usr_1", nil))
	ignore(person.RemoveTeamMember(ctx, "usr_1"))
	ignore(key.ListRequestLogs(ctx, client.RequestLogFilter{CorrelationID: "corr", Status: 404, Limit: 10}))
	ignore(key.ListWebSocketConfigs(ctx, page))
	ignore(key.CreateWebSocketConfig(ctx, []string{"order.*"}))
	ignore(key.GetWebSocketConfig(ctx, "wsc_1"))
	ignore(key.SetWebSocketConfigEnabled(ctx, "wsc_1", false))
	ignore(key.DeleteWebSocketConfig(ctx, "wsc_1"))
	ignore(key.TestWebSocketConfig(ctx, "wsc_1"))
	url, description, enabled := "https://example.com/hook", "d", true
	ignore(key.ListWebhooks(ctx, page))
	ignore(key.CreateWebhook(ctx, client.WebhookRequest{URL: url, Events: []string{"order.*"}, Description: description}))
	ignore(key.GetWebhook(ctx, "whk_1"))
	ignore(key.UpdateWebhook(ctx, "whk_1", client.WebhookChange{URL: &url, Events: []string{"order.*"}, Description: &description,
		Enabled: &enabled}))
	ignore(key.DeleteWebhook(ctx, "whk_1"))
	ignore(key.RotateWebhookSecret(ctx, "whk_1"))
	ignore(key.TestWebhook(ctx, "whk_1"))
	ignore(key.ListWebhookDeliveries(ctx, "whk_1", client.DeliveryFilter{Status: "failed", Event: "Order.Confirmed", Limit: 10}))
	ignore(key.RedeliverWebhookDelivery(ctx, "whk_1", "dlv_1"))
	limit := 5
	ignore(key.UpdateWebhook(ctx, "whk_1", client.WebhookChange{RateLimit: &limit}))
	ignore(key.UpdateWebhook(ctx, "whk_1", client.WebhookChange{RemoveRateLimit: true}))
	ignore(key.RecoverWebhook(ctx, "whk_1", time.Now().Add(-time.Hour), time.Time{}))
	ignore(key.RecoverWebhook(ctx, "whk_1", time.Now().Add(-time.Hour), time.Now()))
	ignore(key.GetWebhookRecovery(ctx, "whk_1", "rcv_1"))
	ignore(key.ListWebhookRecoveries(ctx, "whk_1", page))

	// A chain's node, read through POST /api/v1/rpc/{chain}.
	ignore(key.ChainRPC(ctx, "ethereum", []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`)))

	// The live channel: the recorder refuses the upgrade, which is enough to be reached.
	ignore(key.FollowEvents(ctx, "wsc_1", func(client.Event) error { return nil }, nil))

	routed := *check.Doc
	routed.Servers = nil
	router, err := legacy.NewRouter(&routed)
	if err != nil {
		t.Fatal(err)
	}
	reached := map[string]bool{}
	for i, req := range rec.requests {
		op := check.Operation(req.Method, req.URL.Path)
		if op == "" {
			t.Errorf("the client sent %s %s, which docs/openapi.json does not describe", req.Method, req.URL.Path)
			continue
		}
		reached[op] = true
		req.Body = io.NopCloser(bytes.NewReader(rec.bodies[i]))
		req.URL.Scheme, req.URL.Host = "http", req.Host
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s: %v", op, err)
			continue
		}
		err = openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}})
		if err != nil {
			t.Errorf("%s: docs/openapi.json refuses the client's request %s\n  %s\n  body %s", op, req.URL.RequestURI(),
				strings.ReplaceAll(err.Error(), "\n", "\n  "), rec.bodies[i])
		}
	}
	var missed []string
	for _, op := range check.Operations() {
		if !reached[op] {
			missed = append(missed, op)
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("no client method reaches %d operations of docs/openapi.json:\n  %s", len(missed), strings.Join(missed, "\n  "))
	}
}
