package approvers

import (
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/opentreasury/treasury/internal/chain"
)

// TestTheWorkedStatementOfTheDocs holds docs/signer.md's worked example to the code: the
// statement's canonical JSON and the digest an approval of it signs, so that a signer
// written in another language can be checked against them.
func TestTheWorkedStatementOfTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/signer.md")
	if err != nil {
		t.Fatal(err)
	}
	st := Statement{OrgID: "org_0192f7c4a1b27d3e8f4a5b6c7d8e9f01", App: "pay", Domain: "payment", OrderID: "ord_0192f7c4a1b27d3e8f4a5b6c7d8e9f10",
		Chain: "ethereum", WalletID: "wal_0192f7c4a1b27d3e8f4a5b6c7d8e9f09", From: "0xAb5801a7D398351b8bE11C439e05C5B3259aeC9B",
		Intent: []chain.Intent{{Leg: "TRANSFER", To: "0x1111111111111111111111111111111111111111", Asset: "USDC", Amount: "1234560000",
			Contract: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", Method: "transfer"}},
		PolicyVersion: 4, RequiredApprovals: 2, ExpiresAt: "2026-12-01T09:30:00.000Z"}
	canonical, err := st.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	digest := hex.EncodeToString(DecisionDigest("APPROVE", canonical))
	for what, want := range map[string]string{"the canonical statement": "\n" + string(canonical) + "\n", "its approval's digest": "\n" + digest + "\n"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/signer.md does not show %s:%s", what, want)
		}
	}
}
