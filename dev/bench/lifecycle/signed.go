package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/signer"
)

// payee is a destination the seeded whitelist and the bench signer's rules allow.
const payee = "0x1111111111111111111111111111111111111111"

// loneSigned measures a lone payment that needs one approval and is signed by treasury
// signer for the manual wallet, twice in the same bundle: plain (an unsigned decision, a
// signer that checks only the request's consistency) and verified (the policy's
// signedApprovals, a decision signed with the seeded approver key, a signer with its own
// rules and quorum pinning that key). It prints, for each, decide->signed (where the
// verification happens) and submit->confirmed, and the difference: the verification's cost.
func loneSigned(devBin, extra string, n int, timeout time.Duration) error {
	b, c, err := startLone(devBin, extra)
	if err != nil {
		return err
	}
	defer b.Stop()
	creds := c.Creds
	i := slices.IndexFunc(creds.Wallets, func(w seed.Wallet) bool { return !w.AutoSign && w.Chain == "ethereum" })
	if i < 0 {
		return errors.New("the bundle has no manual ethereum wallet")
	}
	wallet := creds.Wallets[i]
	key, err := keys.Parse(chain.Secp256k1, wallet.PrivateKey)
	if err != nil {
		return err
	}
	status, device, err := c.Do("POST", "/developer/api-keys", creds.Keys["treasury"].SK,
		fmt.Sprintf(`{"kind":"tk","actions":["sign"],"resourceIds":[%q],"label":"bench signer"}`, wallet.ID))
	if err != nil || status != 201 {
		return fmt.Errorf("the signer's key: HTTP %d %v", status, err)
	}
	approver := creds.ApproverKeys["pay"].Approve
	approverKey, err := keys.Parse(approver.Scheme, approver.PrivateKey)
	if err != nil {
		return err
	}
	rules, err := benchSignerRules(approver.KeyID, approverKey)
	if err != nil {
		return err
	}
	run := lonePayer{c: c, wallet: wallet.ID, timeout: timeout}
	plain, err := run.measure(n, device["secret"].(string), key, nil, nil)
	if err != nil {
		return fmt.Errorf("plain: %w", err)
	}
	verified, err := run.measure(n, device["secret"].(string), key, rules, &decisionKey{id: approver.KeyID, key: approverKey})
	if err != nil {
		return fmt.Errorf("verified: %w", err)
	}
	for _, r := range []struct {
		label string
		t     loneTimes
	}{{"plain   ", plain}, {"verified", verified}} {
		fmt.Printf("lone approved payment, %s: decide->signed p50 %v  submit->confirmed p50 %v  (%d)\n", r.label,
			r.t.p50(r.t.decideToSigned).Round(100*time.Microsecond), r.t.p50(r.t.submitToConfirmed).Round(time.Millisecond), n)
	}
	cost := verified.p50(verified.decideToSigned) - plain.p50(plain.decideToSigned)
	fmt.Printf("signed approvals and the verifying signer: decide->signed %+v at p50 (ratio %.2f); submit->confirmed ratio %.2f\n",
		cost.Round(100*time.Microsecond), ratio(verified.p50(verified.decideToSigned), plain.p50(plain.decideToSigned)),
		ratio(verified.p50(verified.submitToConfirmed), plain.p50(plain.submitToConfirmed)))
	devbundle.Summarize("decide->signed with signed approvals and the verifying signer",
		"p50 "+verified.p50(verified.decideToSigned).Round(100*time.Microsecond).String(),
		"plain p50 "+plain.p50(plain.decideToSigned).Round(100*time.Microsecond).String(),
		fmt.Sprintf("%.2f", ratio(verified.p50(verified.decideToSigned), plain.p50(plain.decideToSigned))), "report", "")
	return nil
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// benchSignerRules are the verifying signer's own rules for the bench's payments: the
// in-process chain, the payee, and one approval of the pinned key for any amount.
func benchSignerRules(keyID string, approver *keys.Key) (*signer.Policy, error) {
	return signer.ParsePolicy(fmt.Appendf(nil, `{"chains": {"ethereum": {"chainId": 1337, "maxFeeWei": "100000000000000000"}},
  "allow": {"destinations": [%q]},
  "approvers": {"keys": [{"id": %q, "scheme": %q, "publicKey": %q}], "tiers": [{"minAmount": "0", "approvals": 1}]}}`,
		payee, keyID, approver.Scheme, approver.PublicKey()))
}

// lonePayer pays one approved payment at a time from the manual wallet.
type lonePayer struct {
	c       *devbundle.Client
	wallet  string
	timeout time.Duration
}

type loneTimes struct{ decideToSigned, submitToConfirmed []time.Duration }

func (t loneTimes) p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return devbundle.Percentile(s, .5)
}

// decisionKey is the approver key a bench decision is signed with.
type decisionKey struct {
	id  string
	key *keys.Key
}

// measure runs n payments (and one first to warm up) with the signer's rules (nil: none),
// the app's policy wanting signed approvals when approver is set, which then signs.
func (p lonePayer) measure(n int, token string, key *keys.Key, rules *signer.Policy, approver *decisionKey) (loneTimes, error) {
	pay := p.c.Creds.Keys["pay"]
	policy := `{"approvalTiers":[{"minUsd":"0","quorum":1}]}`
	if approver != nil {
		policy = `{"signedApprovals":true,"approvalTiers":[{"minUsd":"0","quorum":1}]}`
	}
	if status, body, err := p.c.Do("PUT", "/policies/pay", pay.SK, policy); err != nil || status != 200 {
		return loneTimes{}, fmt.Errorf("policy: HTTP %d %v %v", status, body, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = signer.Run(ctx, signer.Config{BaseURL: p.c.Creds.BaseURL, Token: token, WalletID: p.wallet, Key: key,
			Interval: 2 * time.Millisecond, Policy: rules, Log: slog.New(slog.DiscardHandler)})
	}()
	var out loneTimes
	for i := range n + 1 {
		decide, signed, submitted, confirmed, err := p.one(approver)
		if err != nil {
			return out, err
		}
		if i > 0 {
			out.decideToSigned = append(out.decideToSigned, signed.Sub(decide))
			out.submitToConfirmed = append(out.submitToConfirmed, confirmed.Sub(submitted))
		}
	}
	return out, nil
}

// one pays once: create, submit, approve (signed when approver is set), and follows
// the order to confirmed, polling it.
func (p lonePayer) one(approver *decisionKey) (decide, signed, submitted, confirmed time.Time, err error) {
	pay := p.c.Creds.Keys["pay"]
	status, order, err := p.c.Do("POST", "/payments", pay.SK,
		fmt.Sprintf(`{"walletId":%q,"asset":"ETH","amount":"0.001","destination":{"address":%q}}`, p.wallet, payee))
	if err != nil || status != 201 {
		return decide, signed, submitted, confirmed, fmt.Errorf("create: HTTP %d %v %v", status, order, err)
	}
	id := order["id"].(string)
	submitted = time.Now()
	if status, body, err := p.c.Do("POST", "/payments/"+id+"/submit", pay.SK, "{}"); err != nil || status != 202 {
		return decide, signed, submitted, confirmed, fmt.Errorf("submit: HTTP %d %v %v", status, body, err)
	}
	o, _, err := p.until(id, "pending_approval")
	if err != nil {
		return decide, signed, submitted, confirmed, err
	}
	itemID := o["approval"].(map[string]any)["itemId"].(string)
	body := `{"decision":"APPROVE"}`
	if approver != nil {
		statement, err := p.statement(itemID)
		if err != nil {
			return decide, signed, submitted, confirmed, err
		}
		sig, err := approver.key.Sign(approvers.DecisionDigest("APPROVE", []byte(statement)))
		if err != nil {
			return decide, signed, submitted, confirmed, err
		}
		body = fmt.Sprintf(`{"decision":"APPROVE","keyId":%q,"signature":%q}`, approver.id, base64.StdEncoding.EncodeToString(sig))
	}
	decide = time.Now()
	if status, answer, err := p.c.Do("POST", "/approvals/payment/"+itemID+"/decide", pay.Approve, body); err != nil || status != 202 {
		return decide, signed, submitted, confirmed, fmt.Errorf("decide: HTTP %d %v %v", status, answer, err)
	}
	if _, signed, err = p.until(id, "signed", "broadcast", "confirmed"); err != nil {
		return decide, signed, submitted, confirmed, err
	}
	_, confirmed, err = p.until(id, "confirmed")
	return decide, signed, submitted, confirmed, err
}

// until polls the order until its status is one of want, and says when it saw it.
func (p lonePayer) until(id string, want ...string) (map[string]any, time.Time, error) {
	deadline := time.Now().Add(p.timeout)
	for time.Now().Before(deadline) {
		status, o, err := p.c.Do("GET", "/payments/"+id, p.c.Creds.Keys["pay"].Read, "")
		if err != nil || status != 200 {
			return nil, time.Time{}, fmt.Errorf("read %s: HTTP %d %v", id, status, err)
		}
		s, _ := o["status"].(string)
		if slices.Contains(want, s) {
			return o, time.Now(), nil
		}
		if s == "failed" || s == "rejected" {
			return nil, time.Time{}, fmt.Errorf("payment %s ended %s: %v", id, s, o["failure"])
		}
		time.Sleep(time.Millisecond)
	}
	return nil, time.Time{}, fmt.Errorf("payment %s not %v within %v", id, want, p.timeout)
}

// statement is the approval item's statement, as the approver's list gives it.
func (p lonePayer) statement(itemID string) (string, error) {
	status, page, err := p.c.Do("GET", "/approvals?domain=payment&limit=100", p.c.Creds.Keys["pay"].Approve, "")
	if err != nil || status != 200 {
		return "", fmt.Errorf("approvals: HTTP %d %v", status, err)
	}
	for _, it := range page["data"].([]any) {
		item := it.(map[string]any)
		if item["id"] == itemID {
			s, _ := item["statement"].(string)
			return s, nil
		}
	}
	return "", fmt.Errorf("item %s is not pending", itemID)
}
