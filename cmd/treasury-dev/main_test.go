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

// The profiles the benchmarks ask for (-bundle-flags "--cpu-profile …") are flags of the
// bundle: a bench passing them got "flag provided but not defined" once they were lost.
func TestProfileFlagsNameTheirFiles(t *testing.T) {
	f, code := parseBundleFlags([]string{"--cpu-profile", "run.cpu", "--alloc-profile", "run.alloc"})
	if f == nil || code != 0 {
		t.Fatalf("parse: code %d", code)
	}
	if f.cpuProfile != "run.cpu" || f.allocProfile != "run.alloc" {
		t.Fatalf("profiles %q %q", f.cpuProfile, f.allocProfile)
	}
}

// docs/dev-bundle.md lists every flag of treasury-dev that its usage prints, and
// docs/deployment.md every flag of treasury-dev cluster.
func TestTheDocsListEveryFlag(t *testing.T) {
	bundle := printedFlags(t, func() int { _, code := parseBundleFlags([]string{"-h"}); return code })
	if missing := unlisted(t, "../../docs/dev-bundle.md", bundle); len(missing) > 0 {
		t.Errorf("docs/dev-bundle.md lists no --%s", strings.Join(missing, ", --"))
	}
	cluster := printedFlags(t, func() int { return runCluster([]string{"-h"}) })
	if missing := unlisted(t, "../../docs/deployment.md", cluster); len(missing) > 0 {
		t.Errorf("docs/deployment.md lists no --%s of treasury-dev cluster", strings.Join(missing, ", --"))
	}
}

// printedFlags are the flags a usage message, printed by run on standard error, lists.
func printedFlags(t *testing.T, run func() int) []string {
	t.Helper()
	usage, err := os.CreateTemp(t.TempDir(), "usage")
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = usage
	code := run()
	os.Stderr = stderr
	printed, _ := os.ReadFile(usage.Name())
	var names []string
	for _, line := range strings.Split(string(printed), "\n") {
		if strings.HasPrefix(line, "  -") {
			names = append(names, strings.Fields(strings.TrimPrefix(line, "  -"))[0])
		}
	}
	if code != 0 || len(names) < 5 {
		t.Fatalf("the usage (exit %d) printed %d flags: %s", code, len(names), printed)
	}
	return names
}

// unlisted are the flags a doc's tables do not list (a row starting with them, comma
// separated).
func unlisted(t *testing.T, doc string, flags []string) []string {
	t.Helper()
	raw, err := os.ReadFile(doc)
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
	var missing []string
	for _, f := range flags {
		if !listed[f] {
			missing = append(missing, f)
		}
	}
	return missing
}
