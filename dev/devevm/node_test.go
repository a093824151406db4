package devevm

import (
	"context"
	"crypto/ecdsa"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/chain/evm"
)

func TestADevChainKeepsItsContractsAndBalancesAcrossARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wallet, _ := crypto.GenerateKey()
	who := crypto.PubkeyToAddress(wallet.PublicKey)
	opts := NodeOptions{Dir: dir, ChainID: 1337, BlockTime: 20 * time.Millisecond, Confirmations: 1}
	n, err := StartNode(opts)
	if err != nil {
		t.Fatal(err)
	}
	d := &Deployer{Client: n.Client(), Key: FaucetKey()}
	cfg, err := d.Deploy(ctx, Plan{Name: "ethereum", ChainID: 1337, NativeAsset: "ETH",
		Tokens:    []TokenPlan{{Symbol: "USDC", Decimals: 6}},
		PricesUSD: map[string]decimal.Decimal{"ETH": decimal.NewFromInt(3000), "USDC": decimal.NewFromInt(1)},
		Protocols: []string{"aave"},
		Funds:     map[common.Address]map[string]decimal.Decimal{who: {"ETH": decimal.NewFromInt(10), "USDC": decimal.NewFromInt(250)}},
		Spenders:  []*ecdsa.PrivateKey{wallet}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Confirmations = 1
	head, err := n.Client().BlockNumber(ctx)
	if err != nil || head == 0 {
		t.Fatalf("the block loop sealed the deployment: head %d %v", head, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n, err = StartNode(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	again, err := n.Client().BlockNumber(ctx)
	if err != nil || again < head {
		t.Fatalf("after a restart the chain is at block %d (%v), was %d", again, err, head)
	}
	c, err := evm.New(ctx, cfg, n.Client())
	if err != nil {
		t.Fatalf("the token is still deployed: %v", err)
	}
	b, err := c.Balances(ctx, "ethereum", who.Hex())
	if err != nil {
		t.Fatal(err)
	}
	if !b["USDC"].Equal(decimal.NewFromInt(250)) || b["ETH"].GreaterThan(decimal.NewFromInt(10)) || b["ETH"].LessThan(decimal.RequireFromString("9.99")) {
		t.Fatalf("balances after a restart: %v (10 ETH less the allowances' gas, 250 USDC)", b)
	}
}
