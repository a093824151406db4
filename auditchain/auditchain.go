// Package auditchain is the audit log's hash chain: how an entry is encoded and hashed,
// and how a run of entries is verified. The store hashes each record with it as it
// appends it, and the API's check of the stored chain and `treasury audit verify` verify
// with it, so a file checked offline is checked by the very code that wrote the chain.
//
// Each organisation's records form one chain, numbered by seq from 1 without gaps. An
// entry's hash is the SHA-256 of its canonical encoding (Canonical), which covers its
// fields and the hash of the entry before it (prevHash; Genesis for seq 1), so altering,
// removing or reordering an entry breaks the chain from there on. docs/audit.md states
// the encoding for verifiers written in other languages.
package auditchain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/opentreasury/treasury/internal/events"
)

// Genesis is the prevHash of an organisation's first entry: 64 zeros.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Version opens every entry's canonical encoding, so that a future encoding can never
// produce the same bytes as this one.
const Version = "treasury.audit.v1"

// Record is what every audit record says, in the chain and in the API's answers alike:
// who did what to which resource, when, under which correlation id.
type Record struct {
	ID            string          `json:"id"`
	App           string          `json:"app"`
	Actor         Actor           `json:"actor"`
	Action        string          `json:"action"`
	ResourceType  string          `json:"resourceType"`
	ResourceID    string          `json:"resourceId"`
	CorrelationID string          `json:"correlationId"`
	Details       json.RawMessage `json:"details"`
	// CreatedAt is hashed as the API writes it, to the millisecond, so that the time an
	// export shows is exactly the time that was hashed.
	CreatedAt events.Time `json:"createdAt"`
}

// Entry is one audit record as the chain holds it, and as the export writes it: one JSON
// object a line, oldest first.
type Entry struct {
	Seq   int64  `json:"seq"`
	OrgID string `json:"orgId"`
	Record
	PrevHash string `json:"prevHash"`
	Hash     string `json:"hash"`
}

// Actor is who acted: Type key, oauth_client, user, device or system, and its id.
type Actor struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Head is where a chain, or a run of it, ends: its last entry's seq and hash.
type Head struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// Canonical is the encoding an entry's hash is taken over: a JSON array, without
// whitespace, of Version, seq, id, orgId, app, actor type, actor id, action, resource
// type, resource id, correlation id, details, createdAt and prevHash. Details are written
// canonically (CanonicalJSON); createdAt in UTC with milliseconds
// (2026-11-22T01:24:34.123Z). The entry's own hash is not part of it.
func Canonical(e *Entry) ([]byte, error) {
	details, err := CanonicalJSON(e.Details)
	if err != nil {
		return nil, fmt.Errorf("auditchain: details of %s: %w", e.ID, err)
	}
	b := make([]byte, 0, 256+len(details))
	b = append(b, '[')
	b = appendString(b, Version)
	b = append(b, ',')
	b = strconv.AppendInt(b, e.Seq, 10)
	for _, s := range []string{e.ID, e.OrgID, e.App, e.Actor.Type, e.Actor.ID, e.Action, e.ResourceType, e.ResourceID, e.CorrelationID} {
		b = append(b, ',')
		b = appendString(b, s)
	}
	b = append(b, ',')
	b = append(b, details...)
	b = append(b, ',')
	b = appendString(b, events.FormatTime(e.CreatedAt.Time))
	b = append(b, ',')
	b = appendString(b, e.PrevHash)
	return append(b, ']'), nil
}

// Hash is the entry's hash: the SHA-256 of its canonical encoding, lowercase hex.
func Hash(e *Entry) (string, error) {
	b, err := Canonical(e)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// DetailsOf is a record's stored details as an entry carries them: the stored JSON,
// written canonically. Stored text that is not JSON (the service never writes such) is
// carried as a JSON string holding it, so that it is still hashed, and shown, exactly.
func DetailsOf(stored string) json.RawMessage {
	if b, err := CanonicalJSON([]byte(stored)); err == nil {
		return b
	}
	return appendString(nil, stored)
}
