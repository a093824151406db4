package api

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// inlineWalletSync runs a registered wallet's first sync at once: the sync activity, in
// Temporal's test environment for activities.
type inlineWalletSync struct{ portfolio *activities.Portfolio }

func (s inlineWalletSync) SyncWallet(_ context.Context, ref workflows.WalletRef) error {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(s.portfolio)
	_, err := env.ExecuteActivity(workflows.SyncWalletBalancesActivity, workflows.SyncWalletBalancesInput{Wallets: []workflows.WalletRef{ref}})
	return err
}

// challenge asks for a registration challenge with a credential.
func (f *fixture) challenge(t *testing.T, token, chainName, address string) apitypes.WalletChallenge {
	t.Helper()
	r := f.post(t, "/api/v1/treasury/wallets/challenges", token, `{"chain":"`+chainName+`","address":"`+address+`"}`)
	var c apitypes.WalletChallenge
	if r.status != 201 || json.Unmarshal(r.body, &c) != nil || !strings.Contains(strings.ToLower(c.Message), strings.ToLower(address)) {
		t.Fatalf("challenge %s %s: %d %s", chainName, address, r.status, r.body)
	}
	return c
}

// registration is a registration's body.
func registration(chainName, address, label, challengeID, signature string) string {
	b, _ := json.Marshal(map[string]string{"chain": chainName, "address": address, "label": label,
		"challengeId": challengeID, "signature": signature})
	return string(b)
}

// A wallet is registered only with its key's signature of a fresh challenge: EIP-191
// personal_sign on EVM chains, ed25519 on Solana. The challenge works once, for the wallet
// it names; an address is registered once; the first balance sync runs at once.
func TestAWalletIsRegisteredWithProofOfItsKey(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		f := newFixtureOn(t, s)
		ctx := context.Background()
		treasury := f.creds.Keys["treasury"].SK
		evmKey, _ := keys.Generate(chain.Secp256k1)
		other, _ := keys.Generate(chain.Secp256k1)
		address := evmKey.Address()
		// Funds on the chain before registration: the first sync finds them.
		if err := f.chain.Fund(ctx, "ethereum", address, "ETH", decimal.RequireFromString("2")); err != nil {
			t.Fatal(err)
		}

		// Who may: developer on treasury. A read key, or another app's secret key, may not.
		for _, token := range []string{f.creds.Keys["treasury"].Read, f.creds.Keys["pay"].SK} {
			f.post(t, "/api/v1/treasury/wallets/challenges", token, `{"chain":"ethereum","address":"`+address+`"}`).
				wantProblem(t, 403, apitypes.CodePermissionDenied)
		}
		for _, body := range []string{`{"chain":"ethereum","address":"0x12"}`, `{"chain":"solana","address":"0xabc"}`,
			`{"address":"` + address + `"}`, `{"chain":"ethereum","address":"` + address + `","publicKey":"x"}`} {
			f.post(t, "/api/v1/treasury/wallets/challenges", treasury, body).wantProblem(t, 422, apitypes.CodeValidationFailed)
		}

		// The address in lower case is the same wallet, checksummed.
		c := f.challenge(t, treasury, "ethereum", strings.ToLower(address))
		if c.Address != address || !strings.Contains(c.Message, f.creds.OrgID) || !strings.Contains(c.Message, "moves no funds") {
			t.Fatalf("the challenge: %+v", c)
		}
		wrong, _ := other.SignPersonal(c.Message)
		f.post(t, "/api/v1/treasury/wallets", treasury, registration("ethereum", address, "Operating", c.ChallengeID, wrong)).
			wantProblem(t, 422, apitypes.CodeInvalidSignature)
		// A signature over the raw digest is not personal_sign's.
		raw, _ := evmKey.Sign(make([]byte, 32))
		f.post(t, "/api/v1/treasury/wallets", treasury, registration("ethereum", address, "Operating", c.ChallengeID, "0x"+hex.EncodeToString(raw))).
			wantProblem(t, 422, apitypes.CodeInvalidSignature)
		// The challenge names one wallet.
		f.post(t, "/api/v1/treasury/wallets", treasury, registration("ethereum", other.Address(), "Other", c.ChallengeID, wrong)).
			wantProblem(t, 422, apitypes.CodeValidationFailed)

		sig, _ := evmKey.SignPersonal(c.Message)
		r := f.post(t, "/api/v1/treasury/wallets", treasury, registration("ethereum", address, "Operating", c.ChallengeID, sig))
		var w apitypes.Wallet
		if r.status != 201 || json.Unmarshal(r.body, &w) != nil || !strings.HasPrefix(w.ID, "wal_") || w.Address != address ||
			w.Scheme != chain.Secp256k1 || w.PublicKey != evmKey.PublicKey() || w.AutoSign || w.ArchivedAt != nil {
			t.Fatalf("register: %d %s", r.status, r.body)
		}
		f.post(t, "/api/v1/treasury/wallets", treasury, registration("ethereum", address, "Again", c.ChallengeID, sig)).
			wantProblem(t, 422, apitypes.CodeValidationFailed)
		again := f.challenge(t, treasury, "ethereum", address)
		sig2, _ := evmKey.SignPersonal(again.Message)
		f.post(t, "/api/v1/treasury/wallets", treasury, registration("ethereum", address, "Again", again.ChallengeID, sig2)).
			wantProblem(t, 409, apitypes.CodeConflict)
		// Another organisation cannot use this one's challenge.
		f.post(t, "/api/v1/treasury/wallets", f.creds.OtherOrg.Keys["pay"]["sk"], registration("ethereum", address, "x", again.ChallengeID, sig2)).
			wantProblem(t, 403, apitypes.CodePermissionDenied)

		// The first sync ran: the wallet is valued (2 ETH at 3,000 USD).
		list := f.do(t, "GET", "/api/v1/treasury/wallets?limit=100", treasury, nil)
		if !strings.Contains(string(list.body), `"id":"`+w.ID+`"`) || !strings.Contains(string(list.body), `"usdValue":"6000.00"`) {
			t.Fatalf("the registered wallet in the list, valued: %s", list.body)
		}

		// Solana: ed25519 over the message, base58.
		solKey, _ := keys.Generate(chain.Ed25519)
		sc := f.challenge(t, treasury, "solana", solKey.SolanaAddress())
		solSig, _ := solKey.SignSolanaMessage(sc.Message)
		f.post(t, "/api/v1/treasury/wallets", treasury, registration("solana", solKey.SolanaAddress(), "Solana ops", sc.ChallengeID, solSig[:len(solSig)-2]+"11")).
			wantProblem(t, 422, apitypes.CodeInvalidSignature)
		r = f.post(t, "/api/v1/treasury/wallets", treasury, registration("solana", solKey.SolanaAddress(), "Solana ops", sc.ChallengeID, solSig))
		var sw apitypes.Wallet
		if r.status != 201 || json.Unmarshal(r.body, &sw) != nil || sw.Scheme != chain.Ed25519 || sw.PublicKey != solKey.PublicKey() ||
			sw.Address != solKey.SolanaAddress() {
			t.Fatalf("register on solana: %d %s", r.status, r.body)
		}

		// Label, archive: an archived wallet takes no new orders, and keeps its history.
		if r := f.do(t, "PATCH", "/api/v1/treasury/wallets/"+w.ID, treasury, strings.NewReader(`{"label":"Payroll"}`)); r.status != 200 ||
			!strings.Contains(string(r.body), `"label":"Payroll"`) {
			t.Fatalf("relabel: %d %s", r.status, r.body)
		}
		f.do(t, "PATCH", "/api/v1/treasury/wallets/"+w.ID, treasury, strings.NewReader(`{"label":""}`)).wantProblem(t, 422, apitypes.CodeValidationFailed)
		f.do(t, "PATCH", "/api/v1/treasury/wallets/"+w.ID, f.creds.OtherOrg.Keys["pay"]["sk"], strings.NewReader(`{"label":"x"}`)).
			wantProblem(t, 403, apitypes.CodePermissionDenied)
		payment := `{"walletId":"` + w.ID + `","asset":"ETH","amount":"1","destination":{"address":"0x1111111111111111111111111111111111111111"}}`
		if r := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, payment); r.status != 201 {
			t.Fatalf("a payment from the registered wallet: %d %s", r.status, r.body)
		}
		if r := f.post(t, "/api/v1/treasury/wallets/"+w.ID+"/archive", treasury, ""); r.status != 200 || !strings.Contains(string(r.body), `"archivedAt":"`) {
			t.Fatalf("archive: %d %s", r.status, r.body)
		}
		if r := f.post(t, "/api/v1/payments", f.creds.Keys["pay"].SK, payment); r.status != 422 || !strings.Contains(string(r.body), "archived") {
			t.Fatalf("a payment from the archived wallet: %d %s", r.status, r.body)
		}
		if r := f.do(t, "GET", "/api/v1/payments", f.creds.Keys["pay"].SK, nil); !strings.Contains(string(r.body), `"walletId":"`+w.ID+`"`) {
			t.Fatalf("the archived wallet's payment is gone: %s", r.body)
		}
		f.post(t, "/api/v1/treasury/wallets/wal_unknown/archive", treasury, "").wantProblem(t, 404, apitypes.CodeNotFound)
		// Another organisation's owner, who holds developer on its own treasury, finds no
		// such wallet; a member with developer on another app may not change wallets.
		otherOwner := sessionFor(t, f, matrixPerson(t, f, f.creds.OtherOrg.OrgID, auth.RoleOwner, nil, "-"))
		stranger := signedIn{token: otherOwner, csrf: auth.CSRFToken(otherOwner)}
		f.as(t, stranger, "PATCH", "/api/v1/treasury/wallets/"+sw.ID, `{"label":"mine now"}`).wantProblem(t, 404, apitypes.CodeNotFound)
		f.as(t, stranger, "POST", "/api/v1/treasury/wallets/"+sw.ID+"/archive", "").wantProblem(t, 404, apitypes.CodeNotFound)
		tradeDev := sessionFor(t, f, matrixPerson(t, f, f.creds.OrgID, auth.RoleMember, map[string]string{"trade": "read,developer"}, "-"))
		f.as(t, signedIn{token: tradeDev, csrf: auth.CSRFToken(tradeDev)}, "POST", "/api/v1/treasury/wallets/"+sw.ID+"/archive", "").
			wantProblem(t, 403, apitypes.CodePermissionDenied)
		if r := f.do(t, "GET", "/api/v1/treasury/wallets?limit=100", treasury, nil); !strings.Contains(string(r.body), `"label":"Solana ops"`) {
			t.Fatalf("the Solana wallet after the strangers' attempts: %s", r.body)
		}

		audit := f.do(t, "GET", "/api/v1/audit-logs?limit=100", treasury, nil)
		for _, action := range []string{"wallet.registered", "wallet.relabelled", "wallet.archived"} {
			if !strings.Contains(string(audit.body), `"action":"`+action+`"`) {
				t.Fatalf("no %s audit record: %s", action, audit.body)
			}
		}
	})
}
