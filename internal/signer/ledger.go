package signer

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/solana"
)

// Ledger is the signer's own record of what it has signed, a line per signature in a
// file only it writes. An order's leg is signed as one transaction: asked again for the
// same transaction (a retry), or for its replacement at the same nonce (a higher fee for
// the same slot), the signer signs; asked for another transaction of a leg it has signed,
// a second payment of what was approved once, it refuses. The record is written before the
// signature leaves the device, so a crash between the two errs on the side of refusing.
type Ledger struct {
	path   string
	mu     sync.Mutex
	signed map[string]signedLeg
	// paidBy is the position of the leg each order's TRANSFER content (contentOf) was
	// signed for, by order and content.
	paidBy map[string]int
}

// signedLeg is one line of the ledger.
type signedLeg struct {
	OrderID string `json:"orderId"`
	Leg     string `json:"leg"`
	// Position tells a batch payment's parts apart: they are all TRANSFER legs.
	Position int     `json:"position,omitempty"`
	Nonce    *uint64 `json:"nonce,omitempty"`
	// Content, for a TRANSFER, is the hash of what it pays whom (contentOf): a batch's
	// part is never signed again as another part.
	Content string `json:"content,omitempty"`
	Digest  string `json:"digest"`
	At      string `json:"at"`
}

// OpenLedger reads the ledger at path, creating it when it does not exist.
func OpenLedger(path string) (*Ledger, error) {
	l := &Ledger{path: path, signed: map[string]signedLeg{}, paidBy: map[string]int{}}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for n := 1; lines.Scan(); n++ {
		var e signedLeg
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		l.remember(e)
	}
	return l, lines.Err()
}

// remember indexes a line of the ledger. Call with l.mu held, or before l is shared.
func (l *Ledger) remember(e signedLeg) {
	l.signed[ledgerKey(e.OrderID, e.Leg, e.Position)] = e
	if e.Content != "" {
		l.paidBy[e.OrderID+"/"+e.Leg+"/"+e.Content] = e.Position
	}
}

// ledgerKey names a leg in the ledger: its order and name, and for a batch payment's
// parts after the first (TRANSFER legs past position 0) its position too. Every other leg's
// name is unique in its order, and its key is the one ledgers have always used.
func ledgerKey(orderID, leg string, position int) string {
	if leg == "TRANSFER" && position > 0 {
		return fmt.Sprintf("%s/%s/%d", orderID, leg, position)
	}
	return orderID + "/" + leg
}

// contentOf is the hash of what a TRANSFER request pays whom, whatever its nonce, fees or
// blockhash: an EVM transaction's recipient, value and call data, a Solana message's
// instructions; "" for other legs or a request that does not decode.
func contentOf(r client.SigningRequest) string {
	raw, err := hex.DecodeString(r.RawUnsignedTx)
	if err != nil || r.Leg != "TRANSFER" {
		return ""
	}
	var what []byte
	switch {
	case client.IsEVMTransaction(r):
		tx, _, err := evm.DecodeUnsigned(raw)
		if err != nil || tx.To() == nil {
			return ""
		}
		what = append(append(tx.To().Bytes(), tx.Value().Bytes()...), tx.Data()...)
	case client.IsSolanaTransaction(r):
		m, err := solana.DecodeMessage(raw)
		if err != nil {
			return ""
		}
		if what, err = json.Marshal(m.Instructions); err != nil {
			return ""
		}
	default:
		return ""
	}
	sum := sha256.Sum256(what)
	return hex.EncodeToString(sum[:])
}

// nonceOf is the account nonce of an EVM request's transaction; nil on a chain without.
func nonceOf(r client.SigningRequest) *uint64 {
	raw, err := hex.DecodeString(r.RawUnsignedTx)
	if err != nil || !client.IsEVMTransaction(r) {
		return nil
	}
	tx, _, err := evm.DecodeUnsigned(raw)
	if err != nil {
		return nil
	}
	n := tx.Nonce()
	return &n
}

// Check refuses a request for another transaction of a leg already signed, and a part of a
// batch that pays what another part of its order was signed to pay.
func (l *Ledger) Check(r client.SigningRequest) *Refusal {
	content := contentOf(r)
	l.mu.Lock()
	e, ok := l.signed[ledgerKey(r.OrderID, r.Leg, r.Position)]
	twin, paid := l.paidBy[r.OrderID+"/"+r.Leg+"/"+content]
	l.mu.Unlock()
	if content != "" && paid && twin != r.Position {
		return refusal("already_signed", "the %s leg at position %d of %s pays what its leg at position %d was signed to pay; a part is paid once",
			r.Leg, r.Position, r.OrderID, twin)
	}
	if !ok || e.Digest == r.Digest {
		return nil
	}
	if n := nonceOf(r); n != nil && e.Nonce != nil && *n == *e.Nonce {
		return nil
	}
	return refusal("already_signed", "the %s leg of %s was signed before as another transaction (digest %s); a leg is paid once",
		r.Leg, r.OrderID, e.Digest)
}

// Record writes that the request is being signed, to disk, before the signature is sent.
func (l *Ledger) Record(r client.SigningRequest, at time.Time) error {
	e := signedLeg{OrderID: r.OrderID, Leg: r.Leg, Position: r.Position, Nonce: nonceOf(r), Digest: r.Digest, Content: contentOf(r),
		At: at.UTC().Format(time.RFC3339Nano)}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(line, '\n'))
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		return err
	}
	l.remember(e)
	return nil
}
