package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// --price moves dev feeds (repeatable, assets upper-cased) and --hold-price holds them; a
// price that is not a positive decimal is refused with the flag's usage.
func TestPriceFlagsMoveAndHoldDevFeeds(t *testing.T) {
	f, code := parseBundleFlags([]string{"--price", "ETH=3500", "--price", "wbtc = 61000.5", "--hold-price", "WBTC,sol", "--hold-price", "usdc"})
	if f == nil || code != 0 {
		t.Fatalf("parse: code %d", code)
	}
	if len(f.opts.Prices) != 2 || f.opts.Prices["ETH"].String() != "3500" || f.opts.Prices["WBTC"].String() != "61000.5" {
		t.Fatalf("prices %v", f.opts.Prices)
	}
	if !slices.Equal(f.opts.HoldPrices, []string{"WBTC", "SOL", "USDC"}) {
		t.Fatalf("held %v", f.opts.HoldPrices)
	}
	if f, _ := parseBundleFlags(nil); f.opts.Prices != nil || f.opts.HoldPrices != nil {
		t.Fatalf("no flags, yet %v %v", f.opts.Prices, f.opts.HoldPrices)
	}
	stderr := os.Stderr
	os.Stderr, _ = os.Open(os.DevNull)
	defer func() { os.Stderr = stderr }()
	for _, bad := range []string{"ETH", "ETH=", "ETH=-1", "ETH=0", "=5", "ETH=1e400x"} {
		if f, code := parseBundleFlags([]string{"--price", bad}); f != nil || code != 2 {
			t.Errorf("--price %s was accepted", bad)
		}
	}
}

// docs/dev-bundle.md lists every flag of treasury-dev that its usage prints.
func TestTheDocsListEveryFlag(t *testing.T) {
	raw, err := os.ReadFile("../../docs/dev-bundle.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "| `--") {
			for _, cell := range strings.Split(strings.SplitN(line, "|", 3)[1], ",") {
				listed[strings.Trim(strings.TrimSpace(cell), "`-")] = true
			}
		}
	}
	usage, err := os.CreateTemp(t.TempDir(), "usage")
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = usage
	_, code := parseBundleFlags([]string{"-h"})
	os.Stderr = stderr
	printed, _ := os.ReadFile(usage.Name())
	var names, missing []string
	for _, line := range strings.Split(string(printed), "\n") {
		if strings.HasPrefix(line, "  -") {
			names = append(names, strings.Fields(strings.TrimPrefix(line, "  -"))[0])
		}
	}
	for _, name := range names {
		if !listed[name] {
			missing = append(missing, name)
		}
	}
	if code != 0 || len(names) < 20 {
		t.Fatalf("the usage (exit %d) printed %d flags: %s", code, len(names), printed)
	}
	if len(missing) > 0 {
		t.Fatalf("docs/dev-bundle.md lists no --%s", strings.Join(missing, ", --"))
	}
}
