// Package compromise plays, for the verifying signer's attack tests, whoever controls the
// service's database between an order's approval and its signature: it rewrites signing
// requests as that attacker would, keeping each request's readable fields, raw bytes and
// digest consistent with one another, so that only the signer's own checks stand between
// the rewrite and a signature.
package compromise

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
)

// DB is the service's database, SQLite or PostgreSQL (both take $1, $2, …).
type DB struct{ *sql.DB }

var token = contracts.ABI(contracts.Token)

// rewrite replaces an ERC-20 transfer request's transaction by what change makes of it.
func (db DB) rewrite(ctx context.Context, requestID string, change func(tx *types.Transaction, call evm.Call) (*types.DynamicFeeTx, error)) error {
	var rawHex, fields string
	if err := db.QueryRowContext(ctx, `SELECT raw_unsigned_tx, unsigned_tx FROM signing_requests WHERE id = $1`, requestID).Scan(&rawHex, &fields); err != nil {
		return fmt.Errorf("signing request %s: %w", requestID, err)
	}
	raw, err := hex.DecodeString(rawHex)
	if err != nil {
		return err
	}
	tx, _, err := evm.DecodeUnsigned(raw)
	if err != nil {
		return err
	}
	call, err := evm.DecodeCall(tx.Data())
	if err != nil || call.Method != "transfer" {
		return fmt.Errorf("signing request %s calls %q (%v), not an ERC-20 transfer", requestID, call.Method, err)
	}
	inner, err := change(tx, call)
	if err != nil {
		return err
	}
	evil := types.NewTx(inner)
	evilRaw, err := evm.UnsignedBytes(evil)
	if err != nil {
		return err
	}
	var readable map[string]any
	if err := json.Unmarshal([]byte(fields), &readable); err != nil {
		return err
	}
	readable["to"], readable["data"] = evil.To().Hex(), "0x"+hex.EncodeToString(evil.Data())
	evilFields, _ := json.Marshal(readable)
	digest := hex.EncodeToString(types.LatestSignerForChainID(evil.ChainId()).Hash(evil).Bytes())
	_, err = db.ExecContext(ctx, `UPDATE signing_requests SET raw_unsigned_tx = $1, unsigned_tx = $2, digest = $3 WHERE id = $4`,
		hex.EncodeToString(evilRaw), string(evilFields), digest, requestID)
	return err
}

// like is tx with another recipient and data.
func like(tx *types.Transaction, to common.Address, data []byte) *types.DynamicFeeTx {
	return &types.DynamicFeeTx{ChainID: tx.ChainId(), Nonce: tx.Nonce(), GasTipCap: tx.GasTipCap(), GasFeeCap: tx.GasFeeCap(),
		Gas: tx.Gas(), To: &to, Value: tx.Value(), Data: data}
}

// Redirect (attack a) has the transfer pay to instead, the intent and the approvals left
// as approved.
func (db DB) Redirect(ctx context.Context, requestID string, to common.Address) error {
	return db.rewrite(ctx, requestID, func(tx *types.Transaction, call evm.Call) (*types.DynamicFeeTx, error) {
		data, err := token.Pack("transfer", to, call.Args[1].(*big.Int))
		return like(tx, *tx.To(), data), err
	})
}

// Raise (attack b) multiplies the transfer's amount by factor and rewrites the intent, and
// each approval's copy of it, to match: the approvers' signatures stay over the statement
// they saw.
func (db DB) Raise(ctx context.Context, requestID string, factor int64) error {
	err := db.rewrite(ctx, requestID, func(tx *types.Transaction, call evm.Call) (*types.DynamicFeeTx, error) {
		data, err := token.Pack("transfer", call.Args[0].(common.Address), new(big.Int).Mul(call.Args[1].(*big.Int), big.NewInt(factor)))
		return like(tx, *tx.To(), data), err
	})
	if err != nil {
		return err
	}
	var intent, evidence string
	if err := db.QueryRowContext(ctx, `SELECT intent, approvals FROM signing_requests WHERE id = $1`, requestID).Scan(&intent, &evidence); err != nil {
		return err
	}
	var st approvers.Statement
	if err := json.Unmarshal([]byte(intent), &st); err != nil || len(st.Intent) == 0 {
		return fmt.Errorf("the intent of %s: %v", requestID, err)
	}
	amount, ok := new(big.Int).SetString(st.Intent[0].Amount, 10)
	if !ok {
		return fmt.Errorf("the intent's amount %q", st.Intent[0].Amount)
	}
	st.Intent[0].Amount = amount.Mul(amount, big.NewInt(factor)).String()
	raised, err := st.Canonical()
	if err != nil {
		return err
	}
	var approvals []approvers.Evidence
	if err := json.Unmarshal([]byte(evidence), &approvals); err != nil {
		return err
	}
	for i := range approvals {
		approvals[i].Statement = string(raised)
	}
	copies, _ := json.Marshal(approvals)
	_, err = db.ExecContext(ctx, `UPDATE signing_requests SET intent = $1, approvals = $2 WHERE id = $3`, string(raised), string(copies), requestID)
	return err
}

// ReplaceApprovals (attack c) replaces the request's approvals by one APPROVE under the
// approver key keyID, signed by sign over the request's intent (a forgery with another
// key, or "" for none).
func (db DB) ReplaceApprovals(ctx context.Context, requestID, keyID string, sign func(statement string) string) error {
	var intent string
	if err := db.QueryRowContext(ctx, `SELECT intent FROM signing_requests WHERE id = $1`, requestID).Scan(&intent); err != nil {
		return err
	}
	forgery, _ := json.Marshal([]approvers.Evidence{{Decision: "APPROVE", DecidedBy: "key_forged", KeyID: keyID, Scheme: approvers.Ed25519,
		Signature: sign(intent), Statement: intent, DecidedAt: "2026-11-29T00:00:00.000Z"}})
	_, err := db.ExecContext(ctx, `UPDATE signing_requests SET approvals = $1 WHERE id = $2`, string(forgery), requestID)
	return err
}

// CallElsewhere (attack d) sends the same call to another contract.
func (db DB) CallElsewhere(ctx context.Context, requestID string, contract common.Address) error {
	return db.rewrite(ctx, requestID, func(tx *types.Transaction, _ evm.Call) (*types.DynamicFeeTx, error) {
		return like(tx, contract, tx.Data()), nil
	})
}

// ApproveUnlimited (attack d) turns the transfer into an approve of 2^256-1 of the token
// to spender.
func (db DB) ApproveUnlimited(ctx context.Context, requestID string, spender common.Address) error {
	return db.rewrite(ctx, requestID, func(tx *types.Transaction, _ evm.Call) (*types.DynamicFeeTx, error) {
		data, err := token.Pack("approve", spender, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))
		return like(tx, *tx.To(), data), err
	})
}

// Attack is one rewrite of the attack tests and the refusal a verifying signer that pins
// the approvals' key and allows the attacker's address posts for it.
type Attack struct {
	Name, Reason string
	Do           func(ctx context.Context, db DB, requestID string) error
}

// Attacks are the rewrites (a)–(d) of the attack table, against requests approved
// with the approver key keyID: (a) another destination, the intent left as approved; (b)
// a thousand times the amount, the intent and the approvals' copies of it rewritten to
// match; (c) the approvals replaced by one signed with another key under keyID, and by
// one with no signature; (d) the same call sent to another contract, and an unlimited
// approve of the token to the attacker.
func Attacks(attacker common.Address, keyID string) []Attack {
	_, forger, _ := ed25519.GenerateKey(rand.Reader)
	return []Attack{
		{"redirect", "intent_mismatch", func(ctx context.Context, db DB, id string) error { return db.Redirect(ctx, id, attacker) }},
		{"raise", "quorum_not_met", func(ctx context.Context, db DB, id string) error { return db.Raise(ctx, id, 1000) }},
		{"forge", "quorum_not_met", func(ctx context.Context, db DB, id string) error {
			return db.ReplaceApprovals(ctx, id, keyID, func(statement string) string {
				return base64.StdEncoding.EncodeToString(ed25519.Sign(forger, approvers.DecisionDigest("APPROVE", []byte(statement))))
			})
		}},
		{"unsign", "quorum_not_met", func(ctx context.Context, db DB, id string) error {
			return db.ReplaceApprovals(ctx, id, keyID, func(string) string { return "" })
		}},
		{"elsewhere", "contract_not_allowed", func(ctx context.Context, db DB, id string) error { return db.CallElsewhere(ctx, id, attacker) }},
		{"unlimited", "unlimited_approve", func(ctx context.Context, db DB, id string) error { return db.ApproveUnlimited(ctx, id, attacker) }},
	}
}
