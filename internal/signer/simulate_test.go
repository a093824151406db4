package signer

import (
	"context"
	"encoding/hex"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

// devNode is a chain with the dev token, holding 1,000 USDC and 10 ETH for the wallet.
func devNode(t testing.TB, wallet common.Address) (Node, common.Address) {
	t.Helper()
	deployer, _ := crypto.GenerateKey()
	backend := simulated.NewBackend(types.GenesisAlloc{
		crypto.PubkeyToAddress(deployer.PublicKey): {Balance: new(big.Int).Mul(big.NewInt(1e18), big.NewInt(1e6))}})
	t.Cleanup(func() { _ = backend.Close() })
	d := &devevm.Deployer{Client: backend.Client(), Key: deployer, Mine: func() { backend.Commit() }}
	cfg, err := d.Deploy(context.Background(), devevm.Plan{Name: "ethereum", ChainID: 1337, NativeAsset: "ETH",
		Tokens:    []devevm.TokenPlan{{Symbol: "USDC", Decimals: 6}},
		PricesUSD: map[string]decimal.Decimal{"ETH": decimal.NewFromInt(3000), "USDC": decimal.NewFromInt(1)},
		Funds:     map[common.Address]map[string]decimal.Decimal{wallet: {"ETH": decimal.NewFromInt(10), "USDC": decimal.NewFromInt(1000)}}})
	if err != nil {
		t.Fatal(err)
	}
	node, ok := backend.Client().(Node)
	if !ok {
		t.Fatal("the simulated backend's client offers no eth_simulateV1")
	}
	return node, cfg.Tokens[0].Address
}

// transferRequest asks the wallet to pay 5 USDC to to, with the intent that says so.
func transferRequest(t testing.TB, id string, token, to common.Address, from string) client.SigningRequest {
	t.Helper()
	amount := big.NewInt(5_000_000)
	tx := eip1559(1337, token, new(big.Int), packed(t, contracts.Token, "transfer", to, amount), 200_000)
	r := evmRequest(t, tx, "")
	r.UnsignedTx = readable(t, tx, common.HexToAddress(from))
	st := approvers.Statement{OrgID: "org_1", App: "pay", Domain: "payment", OrderID: r.OrderID, Chain: "ethereum", WalletID: "wal_mine",
		From: from, Intent: []chain.Intent{{Leg: "TRANSFER", To: to.Hex(), Asset: "USDC", Amount: amount.String(), Contract: token.Hex(), Method: "transfer"}}}
	intent, err := st.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	text := string(intent)
	r.ID, r.Leg, r.Intent = id, "TRANSFER", &text
	return r
}

// brokenNode serves the chain id and fails every simulation, as a node that is down does.
type brokenNode struct{ Node }

func (brokenNode) SimulateV1(context.Context, ethclient.SimulateOptions, *rpc.BlockNumberOrHash) ([]ethclient.SimulateBlockResult, error) {
	return nil, errors.New("connection refused")
}

// TestTheSignersOwnNodeRunsEachTransactionFirst: with rpcUrl, the signer runs each
// transaction on its node before signing. An honest payment is signed; one the chain
// would revert (the dev token refuses 0x…dEaD, an allowed destination here) is refused
// simulation_reverted instead of paying gas for a failure, once its grace has passed (the
// node may be a block behind the service's); a transaction its intent does not say is
// refused intent_mismatch, approvers or not; while the node cannot answer, or was never
// connected, nothing is signed or refused and the request waits.
func TestTheSignersOwnNodeRunsEachTransactionFirst(t *testing.T) {
	key, _ := keys.Generate(chain.Secp256k1)
	wallet := common.HexToAddress(key.Address())
	node, usdc := devNode(t, wallet)
	dead := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	parse := func() *Policy {
		t.Helper()
		p, err := ParsePolicy([]byte(`{"chains": {"ethereum": {"chainId": 1337, "maxFeeWei": "10000000000000000", "rpcUrl": "http://the-signers-node"}},
  "allow": {"destinations": ["` + supplier.Hex() + `", "` + dead.Hex() + `"], "contracts": [{"address": "` + usdc.Hex() + `", "methods": ["transfer"]}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	policy := func(n Node) *Policy {
		p := parse()
		if err := p.Connect(context.Background(), func(_ context.Context, url string) (Node, error) {
			if url != "http://the-signers-node" {
				t.Fatalf("dialled %s", url)
			}
			return n, nil
		}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	honest, reverts := transferRequest(t, "sig_honest", usdc, supplier, wallet.Hex()), transferRequest(t, "sig_dead", usdc, dead, wallet.Hex())
	// The intent says 5 USDC to the supplier; the transaction pays the same to 0x…dEaD.
	misstated := transferRequest(t, "sig_misstated", usdc, dead, wallet.Hex())
	misstated.Intent = honest.Intent

	// Within the grace, the reverting payment waits; the rest is judged at once.
	srv, posted := fakeService(t, honest, reverts, misstated)
	cfg := withDefaults(Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client(), Policy: policy(node),
		RevertGrace: time.Hour})
	done := map[string]bool{}
	if err := pass(context.Background(), cfg, done); err != nil {
		t.Fatal(err)
	}
	if got := posted(); got["/api/v1/signing-requests/sig_honest/signature"]["signature"] == "" || done["sig_dead"] ||
		got["/api/v1/signing-requests/sig_misstated/refusal"]["reason"] != "intent_mismatch" || len(got) != 2 {
		t.Fatalf("within the grace: posted %v", got)
	}

	// Past it (here: none), the reverting payment is refused.
	srv, posted = fakeService(t, honest, reverts)
	cfg = withDefaults(Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client(), Policy: policy(node),
		RevertGrace: -1})
	done = map[string]bool{}
	if err := pass(context.Background(), cfg, done); err != nil {
		t.Fatal(err)
	}
	got := posted()
	if got["/api/v1/signing-requests/sig_honest/signature"]["signature"] == "" {
		t.Fatalf("the honest payment was not signed: %v", got)
	}
	refused := got["/api/v1/signing-requests/sig_dead/refusal"]
	if refused["reason"] != "simulation_reverted" || !strings.Contains(refused["detail"], "0x...dEaD") {
		t.Fatalf("the payment to 0x…dEaD: %v", got)
	}
	if _, signed := got["/api/v1/signing-requests/sig_dead/signature"]; signed {
		t.Fatal("the reverting payment was signed")
	}

	// A node that cannot answer, or a rule whose node was never connected: the request
	// waits.
	for name, p := range map[string]*Policy{"down": policy(brokenNode{node}), "not connected": parse()} {
		srv, posted = fakeService(t, honest)
		cfg = withDefaults(Config{BaseURL: srv.URL, Token: "tk_sign", WalletID: "wal_mine", Key: key, HTTP: srv.Client(), Policy: p})
		done = map[string]bool{}
		if err := pass(context.Background(), cfg, done); err != nil {
			t.Fatal(err)
		}
		if len(posted()) != 0 || done["sig_honest"] {
			t.Fatalf("with its node %s the signer posted %v", name, posted())
		}
	}

	// A node of another chain is refused at start.
	p, _ := ParsePolicy([]byte(`{"chains": {"ethereum": {"chainId": 1, "maxFeeWei": "1", "rpcUrl": "http://elsewhere"}}}`))
	if err := p.Connect(context.Background(), func(context.Context, string) (Node, error) { return node, nil }); err == nil ||
		!strings.Contains(err.Error(), "chain id 1337") {
		t.Fatalf("a node of chain 1337 for a rule of chain 1: %v", err)
	}
}

// BenchmarkPolicySimulate is what rpcUrl adds before each signature: the USDC transfer run
// on the signer's node (eth_simulateV1, here an in-process go-ethereum node, so the
// figure is the node's work and the client's, without a network) and its movements held
// to the intent; compare BenchmarkPolicyCheck in the same run.
func BenchmarkPolicySimulate(b *testing.B) {
	key, _ := keys.Generate(chain.Secp256k1)
	wallet := common.HexToAddress(key.Address())
	node, usdc := devNode(b, wallet)
	p, err := ParsePolicy([]byte(`{"chains": {"ethereum": {"chainId": 1337, "maxFeeWei": "10000000000000000", "rpcUrl": "http://node"}}}`))
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Connect(context.Background(), func(context.Context, string) (Node, error) { return node, nil }); err != nil {
		b.Fatal(err)
	}
	req := transferRequest(b, "sig_1", usdc, supplier, wallet.Hex())
	raw, _ := hex.DecodeString(req.RawUnsignedTx)
	tx, _, err := evm.DecodeUnsigned(raw)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if f, err := p.Simulate(context.Background(), req, tx, "wal_mine", wallet.Hex()); f != nil || err != nil {
			b.Fatal(f, err)
		}
	}
}
