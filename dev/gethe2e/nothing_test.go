package gethe2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/dev/browser"
	"github.com/opentreasury/treasury/dev/cluster"
	"github.com/opentreasury/treasury/dev/devevm"
	"github.com/opentreasury/treasury/dev/freeport"
	"github.com/opentreasury/treasury/dev/wait"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

// An organisation starts from nothing and pays on geth, with no dev seed and no dev signer
// in any process: the operator's `treasury org create` prints a link; the owner opens it in
// chromium and sets a password, registers a wallet whose key the test holds by signing the
// Wallets page's message (EIP-191), and makes a pay sk_, a treasury read tk_ and a device
// key for the wallet on the API keys pages; the test funds the wallet on geth; a payment is
// created, submitted, signed by the `treasury signer` process with the wallet's key and
// confirmed on geth; the portfolio is valued at geth's price feed. A payment to an address
// outside the signer's own rules (--policy) is refused by the signer: the order fails
// signer_refused and the wallet sends nothing; so is one whose simulation on geth, the
// signer's own node, reverts. Then the feed stops
// posting, and past twice its heartbeat an ETH order is refused price_unavailable while a
// USDC one (a fixed price) is still created.
func TestAnOrganisationFromNothingPaysOnGeth(t *testing.T) {
	s := env(t)
	browserPath := browser.Chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// ETH/USD on geth, posted every second by a key of the test's until it stops.
	poster, _ := crypto.GenerateKey()
	faucet := &devevm.Deployer{Client: s.eth, Key: s.geth.faucet}
	if err := faucet.Fund(ctx, s.chain, crypto.PubkeyToAddress(poster.PublicKey), "ETH", decimal.NewFromInt(10)); err != nil {
		t.Fatal(err)
	}
	posts := &devevm.Deployer{Client: s.eth, Key: poster}
	feed, err := posts.DeployFeed(ctx, "ETH", decimal.NewFromInt(2000), crypto.PubkeyToAddress(poster.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	stopPosting := keepPosting(ctx, t, posts, feed, decimal.NewFromInt(2000))
	defer stopPosting()
	pricesFile := filepath.Join(dir, "prices.json")
	raw, _ := json.Marshal([]map[string]string{
		{"asset": "ETH", "chain": "ethereum", "feed": feed.Hex(), "heartbeat": "10s"},
		{"asset": "USDC", "fixed": "1"},
	})
	if err := os.WriteFile(pricesFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	// The cluster, empty.
	name := databaseName + "_nothing"
	if err := cluster.DropDatabases(ctx, s.postgres, name); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freeport.OrFree("127.0.0.1", 0); err != nil {
			t.Fatal(err)
		}
	}
	api := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	c, err := cluster.Start(ctx, cluster.Options{
		TreasuryBin: os.Getenv("TREASURY_BIN"), DevBin: os.Getenv("TREASURY_DEV_BIN"),
		Postgres: s.postgres, Name: name, DataDir: filepath.Join(dir, "cluster"),
		APIPorts: ports[:1], Workers: 1, TemporalPort: ports[1], UIPort: ports[2], NoSeed: true, NoDevChains: true,
		Env: []string{"CHAINS=ethereum", "CHAINS_FILE=" + s.chainsFile, "PRICES_FILE=" + pricesFile,
			"PRICE_REFRESH_INTERVAL=1s", "BALANCE_SYNC_INTERVAL=2s", "PUBLIC_URL=" + api},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("the cluster from nothing: %v", err)
	}
	defer func() {
		if t.Failed() {
			dumpLogs(filepath.Join(dir, "cluster"))
		}
		_ = c.Shutdown()
		_ = cluster.DropDatabases(context.Background(), s.postgres, name)
	}()
	if c.Credentials != nil {
		t.Fatal("a cluster with no seed has seeded credentials")
	}

	// The operator makes the organisation; the owner, in chromium, opens the link, sets a
	// password, registers the wallet and makes the keys.
	owner := operatorOrganisation(ctx, t, browserPath, api, c.DatabaseURL, "From Nothing", "owner@nothing.example")
	walletKey, err := keys.Generate(chain.Secp256k1)
	if err != nil {
		t.Fatal(err)
	}
	walletAddr := common.HexToAddress(walletKey.Address())
	walletID := registerWallet(t, owner, walletKey)
	paySK := newKey(t, owner, "pay", "sk", nil, "")
	treasuryRead := newKey(t, owner, "treasury", "tk", []string{"read"}, "")
	device := newKey(t, owner, "treasury", "tk", []string{"sign"}, walletID)

	if err := faucet.Fund(ctx, s.chain, walletAddr, "ETH", decimal.NewFromInt(3)); err != nil {
		t.Fatal(err)
	}
	// The signer's own rules: ETH and USDC to dest1 (and to 0x…dEaD) only, whatever the
	// service asks; each transaction runs first on geth, the signer's own node.
	signerLog := startSigner(t, api, walletID, device, walletKey, `{"chains": {"ethereum": {"chainId": 1337, "maxFeeWei": "100000000000000000", "rpcUrl": "`+s.geth.url+`"}},
  "allow": {"destinations": ["`+dest1.Hex()+`", "`+dead.Hex()+`"], "contracts": [{"address": "`+s.token(t, "USDC").Address.Hex()+`", "methods": ["transfer"]}]}}`)

	// The first payment, valued at the feed's 2000.
	pay, _ := client.New(api, client.WithToken(paySK))
	reader, _ := client.New(api, client.WithToken(treasuryRead))
	before := s.balance(t, "ETH", dest1)
	o, err := pay.CreateOrder(ctx, payment(walletID, "ETH", "1.5", dest1))
	if err != nil || o.AmountUSD != "3000.00" {
		t.Fatalf("the first payment: %v %+v", err, o)
	}
	if _, err := pay.SubmitOrder(ctx, client.DomainPayment, o.ID); err != nil {
		t.Fatal(err)
	}
	confirmed := false
	defer func() { // the payment and the signer's log, should it never confirm
		if !confirmed {
			log, _ := os.ReadFile(signerLog)
			t.Logf("the payment is %s (%+v %+v); the signer's log:\n%s", o.Status, o.Failure, o.Rejection, log)
		}
	}()
	wait.For(t, 3*time.Minute, "the first payment to confirm", func() bool {
		if o, err = pay.GetOrder(ctx, client.DomainPayment, o.ID); err != nil {
			t.Fatal(err)
		}
		if o.Status == "failed" || o.Status == "rejected" {
			t.Fatalf("the payment is %s", o.Status)
		}
		return o.Status == "confirmed"
	})
	confirmed = true
	if len(o.Legs) != 1 || o.Legs[0].TxHash == nil {
		t.Fatalf("legs %+v", o.Legs)
	}
	mined := s.lookup(t, *o.Legs[0].TxHash)
	oneAndAHalf := s.units(t, "ETH", "1.5")
	if mined.from != walletAddr || mined.tx.Value().Cmp(oneAndAHalf) != 0 || *mined.tx.To() != dest1 {
		t.Fatalf("on geth: %s sent %s wei to %s; want the wallet %s, 1.5 ETH, %s", mined.from, mined.tx.Value(), mined.tx.To(), walletAddr, dest1)
	}
	if got := new(big.Int).Sub(s.balance(t, "ETH", dest1), before); got.Cmp(oneAndAHalf) != 0 {
		t.Fatalf("the payee received %s wei on geth, want %s", got, oneAndAHalf)
	}

	// The portfolio: geth's balance at the feed's price.
	held := decimal.NewFromBigInt(s.balance(t, "ETH", walletAddr), -18)
	want := held.Mul(decimal.NewFromInt(2000)).StringFixedBank(2)
	var p *client.Portfolio
	wait.For(t, time.Minute, fmt.Sprintf("the portfolio to total %s: %s ETH at 2000", want, held), func() bool {
		p, err = reader.Portfolio(ctx)
		return err == nil && p.TotalUSD == want
	})

	// A payment elsewhere: the signer decodes the transaction, finds dest2 outside its
	// rules and refuses it; the order fails signer_refused and the wallet sends nothing.
	sent := s.nonce(t, walletAddr)
	elsewhere, err := pay.CreateOrder(ctx, payment(walletID, "ETH", "0.25", dest2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pay.SubmitOrder(ctx, client.DomainPayment, elsewhere.ID); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 2*time.Minute, "the payment to dest2 to end", func() bool {
		if elsewhere, err = pay.GetOrder(ctx, client.DomainPayment, elsewhere.ID); err != nil {
			t.Fatal(err)
		}
		return elsewhere.Status == "failed" || elsewhere.Status == "confirmed"
	})
	if elsewhere.Status != "failed" || elsewhere.Failure == nil || elsewhere.Failure.Code != "signer_refused" ||
		!strings.Contains(elsewhere.Failure.Message, "destination_not_allowed") {
		t.Fatalf("the payment to dest2: %s %+v", elsewhere.Status, elsewhere.Failure)
	}
	if got := s.nonce(t, walletAddr); got != sent {
		t.Fatalf("the wallet sent %d transactions after the refusal", got-sent)
	}

	// A payment the chain would revert (the dev token refuses 0x…dEaD, which the signer's
	// rules allow): its simulation on geth reverts, so the signer refuses it before it can
	// cost gas, where without a node it fails tx_reverted on chain.
	if err := faucet.Fund(ctx, s.chain, walletAddr, "USDC", decimal.NewFromInt(10)); err != nil {
		t.Fatal(err)
	}
	reverting, err := pay.CreateOrder(ctx, payment(walletID, "USDC", "5", dead))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pay.SubmitOrder(ctx, client.DomainPayment, reverting.ID); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 2*time.Minute, "the payment to 0x…dEaD to end", func() bool {
		if reverting, err = pay.GetOrder(ctx, client.DomainPayment, reverting.ID); err != nil {
			t.Fatal(err)
		}
		return reverting.Status == "failed" || reverting.Status == "confirmed"
	})
	if reverting.Failure == nil || reverting.Failure.Code != "signer_refused" || !strings.Contains(reverting.Failure.Message, "simulation_reverted") ||
		!strings.Contains(reverting.Failure.Message, "DevToken: transfers to 0x...dEaD always revert") {
		t.Fatalf("the payment to 0x…dEaD: %s %+v", reverting.Status, reverting.Failure)
	}
	if got := s.nonce(t, walletAddr); got != sent {
		t.Fatalf("the wallet sent %d transactions after the simulated revert", got-sent)
	}
	if log, _ := os.ReadFile(signerLog); !strings.Contains(string(log), `"simulated":true`) {
		t.Fatalf("the signer's log names no simulated signature:\n%s", log)
	}

	// The feed stops: past twice its heartbeat, ETH is unpriced and its orders refused.
	stopPosting()
	wait.For(t, time.Minute, "an ETH order to be refused as price_unavailable once the feed stopped", func() bool {
		_, err := pay.CreateOrder(ctx, payment(walletID, "ETH", "0.1", dest1))
		var problem *client.Problem
		return errors.As(err, &problem) && problem.Status == http.StatusUnprocessableEntity && problem.Code == "price_unavailable"
	})
	if o, err := pay.CreateOrder(ctx, payment(walletID, "USDC", "5", dest1)); err != nil || o.AmountUSD != "5.00" {
		t.Fatalf("a USDC order at its fixed price: %v %+v", err, o)
	}
	wait.For(t, 30*time.Second, "the portfolio to name ETH unpriced once it is stale", func() bool {
		p, err = reader.Portfolio(ctx)
		return err == nil && slices.Contains(p.UnpricedAssets, "ETH")
	})
}

// keepPosting posts price to the feed every second, as a feed's heartbeat does, until the
// function it returns is called (once or more).
func keepPosting(ctx context.Context, t *testing.T, d *devevm.Deployer, feed common.Address, price decimal.Decimal) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if err := d.PostPrices(ctx, map[common.Address]decimal.Decimal{feed: price}); err != nil && ctx.Err() == nil {
				t.Logf("posting to the feed: %v", err)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(stop); <-done }) }
}

// operatorOrganisation is an organisation the operator makes from nothing (`treasury org
// create` against databaseURL), its owner signed in through the printed link in a chromium
// of their own, closed when the test ends.
func operatorOrganisation(ctx context.Context, t *testing.T, browserPath, api, databaseURL, name, email string) *browser.Tab {
	t.Helper()
	org := exec.CommandContext(ctx, os.Getenv("TREASURY_BIN"), "org", "create", "--name", name, "--owner-email", email, "--json")
	org.Env = append(os.Environ(), "DATABASE_URL="+databaseURL, "PUBLIC_URL="+api)
	out, err := org.Output()
	var made struct{ OrgID, SignInLink string }
	if err != nil || json.Unmarshal(out, &made) != nil || !strings.HasPrefix(made.SignInLink, api+"/console/welcome?token=sil_") {
		t.Fatalf("treasury org create: %v: %s", err, out)
	}
	return signedInByLink(t, browserPath, api, made.SignInLink, "the owner's own long password")
}

// signedInByLink is a person who opened their one-time sign-in link and set their password,
// in a chromium of their own, closed when the test ends.
func signedInByLink(t *testing.T, browserPath, api, link, password string) *browser.Tab {
	t.Helper()
	ctx, stop := browser.Start(t, browserPath)
	t.Cleanup(stop)
	tab := &browser.Tab{T: t, Ctx: ctx, Base: api}
	if at := tab.AcceptLink(link, password); !strings.HasPrefix(at, "/console/") {
		t.Fatalf("%s lands at %s", link, at)
	}
	return tab
}

// startSigner runs `treasury signer` for the wallet, with its key, the device key and its
// own rules (the policy document), until the test ends; it returns its log's path.
func startSigner(t *testing.T, api, walletID, device string, key *keys.Key, policy string) string {
	t.Helper()
	dir := t.TempDir()
	keyFile, policyFile := filepath.Join(dir, "wallet.key"), filepath.Join(dir, "signer-policy.json")
	if err := os.WriteFile(keyFile, []byte(key.Encode()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policyFile, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "signer.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	signer := exec.Command(os.Getenv("TREASURY_BIN"), "signer", "--key", keyFile, "--wallet", walletID, "--url", api, "--interval", "500ms",
		"--policy", policyFile)
	signer.Env, signer.Stdout, signer.Stderr = append(os.Environ(), "TREASURY_TOKEN="+device), log, log
	if err := signer.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = signer.Process.Kill(); _ = signer.Wait(); _ = log.Close() })
	return logPath
}

// registerWallet adds a wallet on the Wallets page: the page shows the message, the test
// signs it with EIP-191 personal_sign, the page takes the signature. It returns the id.
func registerWallet(t *testing.T, owner *browser.Tab, key *keys.Key) string {
	t.Helper()
	address := key.Address()
	owner.Open("/console/treasury/wallets")
	owner.Do("the wallet to add", chromedp.SetValue(chromedp.CSS("#chain"), "ethereum"),
		chromedp.SetValue(chromedp.CSS("#address"), address), chromedp.SetValue(chromedp.CSS("#new-label"), "Operations"))
	if status := owner.Submit("ask for the message", chromedp.Click(chromedp.CSS(`section[aria-labelledby="add"] button[type="submit"]`))); status != http.StatusCreated {
		t.Fatalf("the challenge: HTTP %d at %s", status, owner.Location())
	}
	message := browser.Eval[string](owner, `document.getElementById("message").value`)
	if !strings.Contains(message, address) {
		t.Fatalf("the message to sign does not name %s:\n%s", address, message)
	}
	sig, err := key.SignPersonal(message)
	if err != nil {
		t.Fatal(err)
	}
	owner.Do("paste the signature", chromedp.SetValue(chromedp.CSS("#signature"), sig))
	if status := owner.Submit("register the wallet", chromedp.Click(chromedp.CSS(`section[aria-labelledby="sign"] button[type="submit"]`))); status != http.StatusOK {
		t.Fatalf("registering: HTTP %d at %s: %s", status, owner.Location(), owner.Text("main"))
	}
	if at := owner.Location(); !strings.HasPrefix(at, "/console/treasury/wallets") {
		t.Fatalf("registered, the owner is at %s", at)
	}
	id := browser.Eval[string](owner, `[...document.querySelectorAll("tbody code.hint")].map(c => c.textContent).find(id => id.startsWith("wal_")) || ""`)
	if id == "" || !strings.Contains(owner.Text("tbody"), "Operations") {
		t.Fatalf("the Wallets page lists no new wallet: %s", owner.Text("main"))
	}
	return id
}

// newKey makes a key on an app's API keys page and returns its secret, shown once.
func newKey(t *testing.T, owner *browser.Tab, app, kind string, actions []string, wallet string) string {
	t.Helper()
	owner.Open("/console/" + app + "/api-keys")
	owner.Do("the kind", chromedp.Click(chromedp.CSS(`input[name="kind"][value="`+kind+`"]`)))
	for _, a := range actions {
		owner.Do("tick "+a, chromedp.Click(chromedp.CSS(`input[name="actions"][value="`+a+`"]`)))
	}
	if wallet != "" {
		owner.Do("restrict to the wallet", chromedp.SetValue(chromedp.CSS("#resourceIds"), wallet))
	}
	if status := owner.Submit("create the key", chromedp.Click(chromedp.CSS(`form[action="api-keys"] button[type="submit"]`))); status != http.StatusCreated {
		t.Fatalf("a %s %s key: HTTP %d: %s", app, kind, status, owner.Text("main"))
	}
	secret := browser.Eval[string](owner, `document.getElementById("secret").value`)
	if !strings.HasPrefix(secret, kind+"_") {
		t.Fatalf("the %s key shown: %q", app, secret)
	}
	return secret
}
