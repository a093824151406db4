// Command payouts measures what a batch payment saves: N recipients paid as one batch
// payment beside the same N paid as N single payments, on the same fresh dev bundle, in
// alternating rounds. For each it prints the wall time from the first submit to the last
// confirmation, the bundle's CPU, the transactions put on the chain, and CPU per recipient.
//
//	go run ./dev/bench/payouts -dev-bin bin/treasury-dev -recipients 500 -rounds 2
//
// Every recipient is a fresh address, as a payroll's people are to the token at first: the
// dearest case for the chain (docs/payouts.md).
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
)

// run is one measured payout.
type run struct {
	kind                 string
	recipients, txs      int
	wall, cpu            time.Duration
	confirmed, otherwise int
}

func (r run) cpuPerRecipient() time.Duration { return r.cpu / time.Duration(r.recipients) }

func main() {
	devBin := flag.String("dev-bin", "bin/treasury-dev", "treasury-dev binary to start")
	n := flag.Int("recipients", 500, "recipients of each payout")
	rounds := flag.Int("rounds", 2, "rounds, each a batch and the same count of single payments")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up on a payout after")
	flag.Parse()
	if err := measure(*devBin, *n, *rounds, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "payouts:", err)
		os.Exit(1)
	}
}

func measure(devBin string, n, rounds int, timeout time.Duration) error {
	b, err := devbundle.Start(devBin, []string{"--rate-limit", "100000", "--rate-burst", "100000"})
	if err != nil {
		return fmt.Errorf("start treasury-dev: %w", err)
	}
	defer b.Stop()
	creds, err := devbundle.ReadCredentials(b.CredentialsPath)
	if err != nil {
		return err
	}
	c := devbundle.NewClient(creds)
	pay := c.Creds.Keys["pay"].SK
	// Fresh payees are on no whitelist; and no approval, so that only the lifecycle is
	// measured.
	if status, out, err := c.Do("PUT", "/policies/pay", pay, `{"maxOrderUsd":"100000000"}`); err != nil || status != 200 {
		return fmt.Errorf("the pay policy: %d %v %v", status, out, err)
	}
	var wallets []string
	for _, w := range c.Creds.Wallets {
		if w.AutoSign && w.Chain == "ethereum" {
			wallets = append(wallets, w.ID)
		}
	}
	if len(wallets) == 0 {
		return fmt.Errorf("no auto-signed ethereum wallet")
	}
	payee := 0
	fresh := func() string { payee++; return fmt.Sprintf("0x%040x", 0xb47c0000000+payee) }
	var runs []run
	for round := range rounds {
		for _, kind := range []string{"single", "batch"} {
			r := run{kind: kind, recipients: n}
			var ids []string
			if kind == "batch" {
				entries := make([]string, n)
				for i := range entries {
					entries[i] = fmt.Sprintf(`{"address":%q,"amount":"1.25","reference":"r%d-%d"}`, fresh(), round, i)
				}
				body := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","recipients":[%s]}`, wallets[round%len(wallets)], strings.Join(entries, ","))
				status, out, err := c.Do("POST", "/payments", pay, body)
				if err != nil || status != 201 {
					return fmt.Errorf("create the batch: %d %v %v", status, out, err)
				}
				ids = []string{out["id"].(string)}
				r.txs = len(out["legs"].([]any))
			} else {
				for i := range n {
					body := fmt.Sprintf(`{"walletId":%q,"asset":"USDC","amount":"1.25","destination":{"address":%q}}`, wallets[i%len(wallets)], fresh())
					status, out, err := c.Do("POST", "/payments", pay, body)
					if err != nil || status != 201 {
						return fmt.Errorf("create a payment: %d %v %v", status, out, err)
					}
					ids = append(ids, out["id"].(string))
				}
				r.txs = n
			}
			cpuBefore, err := b.CPU()
			if err != nil {
				return err
			}
			start := time.Now()
			submitted, err := c.SubmitAll("pay", "/payments/", ids)
			if err != nil {
				return err
			}
			confirmed, other, err := c.Confirmations("pay", submitted, timeout)
			if err != nil {
				return err
			}
			cpuAfter, _ := b.CPU()
			last := start
			for _, at := range confirmed {
				if at.After(last) {
					last = at
				}
			}
			r.wall, r.cpu, r.confirmed, r.otherwise = last.Sub(start), cpuAfter-cpuBefore, len(confirmed), other
			fmt.Printf("round %d %-6s: %d recipients in %d orders, %d transactions; %d confirmed, %d otherwise; first submit to last confirmation %v; bundle CPU %v, %v a recipient\n",
				round+1, kind, n, len(ids), r.txs, r.confirmed, r.otherwise, r.wall.Round(time.Millisecond), r.cpu.Round(time.Millisecond),
				r.cpuPerRecipient().Round(time.Microsecond))
			if r.otherwise > 0 {
				return fmt.Errorf("%d %s orders did not confirm", r.otherwise, kind)
			}
			runs = append(runs, r)
		}
	}
	median := func(kind string, of func(run) time.Duration) time.Duration {
		var v []time.Duration
		for _, r := range runs {
			if r.kind == kind {
				v = append(v, of(r))
			}
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	single, batch := median("single", run.cpuPerRecipient), median("batch", run.cpuPerRecipient)
	wallSingle, wallBatch := median("single", func(r run) time.Duration { return r.wall }), median("batch", func(r run) time.Duration { return r.wall })
	ratio := float64(single) / float64(batch)
	fmt.Printf("CPU a recipient: batch %v, single payments %v (same run): the batch %.1fx cheaper (target >= 20x)\n",
		batch.Round(time.Microsecond), single.Round(time.Microsecond), ratio)
	fmt.Printf("wall time for %d recipients: batch %v, single payments %v (%.1fx); transactions: batch %d, single payments %d\n",
		n, wallBatch.Round(time.Millisecond), wallSingle.Round(time.Millisecond), float64(wallSingle)/float64(wallBatch), runs[1].txs, n)
	devbundle.Summarize(fmt.Sprintf("%d recipients as one batch: CPU a recipient", n), batch.Round(time.Microsecond).String(),
		"single payments "+single.Round(time.Microsecond).String(), fmt.Sprintf("%.1fx cheaper", ratio), ">= 20x", devbundle.Verdict(ratio >= 20))
	return nil
}
