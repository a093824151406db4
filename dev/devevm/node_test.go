package devevm

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain/evm"
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

// killedNodeDir names, in a child process of the test below, the directory of the node
// it runs until it is killed.
const killedNodeDir = "TREASURY_TEST_KILLED_NODE_DIR"

// TestADevChainKilledWithoutAShutdownResumesAtItsLastBlock runs a node in a child process,
// deploys the dev contracts and pays an address, kills the child (SIGKILL, no shutdown) as
// soon as the payment is mined, and opens the chain again: the payment's block is still
// there. (Unflushed, the last blocks of so small a chain sit in go-ethereum's write buffer.)
func TestADevChainKilledWithoutAShutdownResumesAtItsLastBlock(t *testing.T) {
	if dir := os.Getenv(killedNodeDir); dir != "" {
		runNodeUntilKilled(dir)
		return
	}
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestADevChainKilledWithoutAShutdownResumesAtItsLastBlock$")
	child.Env = append(os.Environ(), killedNodeDir+"="+dir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var mined uint64
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if n, ok := strings.CutPrefix(lines.Text(), "mined "); ok {
			mined, _ = strconv.ParseUint(n, 10, 64)
			break
		}
	}
	_ = child.Process.Signal(syscall.SIGKILL)
	_ = child.Wait()
	if mined == 0 {
		t.Fatal("the child never reported its payment mined")
	}

	n, err := StartNode(NodeOptions{Dir: dir, ChainID: 1337})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	head, err := n.Client().BlockNumber(context.Background())
	if err != nil || head < mined {
		t.Fatalf("after the kill the chain is at block %d (%v); the payment was mined in block %d", head, err, mined)
	}
	got, err := n.Client().BalanceAt(context.Background(), killedPayee, nil)
	if err != nil || got.Cmp(big.NewInt(killedPayment)) != 0 {
		t.Fatalf("the payee holds %v (%v), want %d", got, err, killedPayment)
	}
}

var killedPayee = common.HexToAddress("0x00000000000000000000000000000000000000aa")

const killedPayment = 1_000_000_007

// runNodeUntilKilled is the child's part: deploy, pay, report the block, wait to be killed.
func runNodeUntilKilled(dir string) {
	die := func(a ...any) {
		fmt.Fprintln(os.Stderr, a...)
		os.Exit(2)
	}
	n, err := StartNode(NodeOptions{Dir: dir, ChainID: 1337, BlockTime: 20 * time.Millisecond, Confirmations: 1})
	if err != nil {
		die(err)
	}
	d := &Deployer{Client: n.Client(), Key: FaucetKey()}
	if _, err := d.Deploy(context.Background(), Plan{Name: "ethereum", ChainID: 1337, NativeAsset: "ETH",
		Tokens:    []TokenPlan{{Symbol: "USDC", Decimals: 6}},
		PricesUSD: map[string]decimal.Decimal{"ETH": decimal.NewFromInt(3000), "USDC": decimal.NewFromInt(1)},
		Protocols: []string{"aave"}}); err != nil {
		die(err)
	}
	if err := d.send(context.Background(), d.Key, []call{{to: killedPayee, value: big.NewInt(killedPayment)}}); err != nil {
		die(err)
	}
	r, err := n.Client().BalanceAt(context.Background(), killedPayee, nil)
	head, herr := n.Client().BlockNumber(context.Background())
	if err != nil || herr != nil || r.Cmp(big.NewInt(killedPayment)) != 0 {
		die("the payment is not in the head block", r, err, herr)
	}
	fmt.Printf("mined %d\n", head)
	select {}
}
