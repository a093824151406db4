package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeTour runs the shell blocks of the README's "A short tour" against the real
// binary, as a newcomer would paste them: the portfolio, a 500 USDC payment confirmed, a
// 20,000 USDC payment the maker may not approve but the approver may, confirmed too; then a
// third payment followed live by treasury events tail over the WebSocket channel.
// Only the address, the credentials path and ./bin/treasury change: to a free port, a temp
// directory and the binary make test-e2e built.
func TestReadmeTour(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README tour needs %s", tool)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(readme)
	start := strings.Index(doc, "## A short tour")
	end := strings.Index(doc, "## Documentation")
	if start < 0 || end < start {
		t.Fatal("the README has no tour section")
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc[start:end], -1) {
		// The binaries are the ones the test was given: no block builds them again.
		script.WriteString(regexp.MustCompile(`(?m)^make bin/\S+ .*\n`).ReplaceAllString(m[1], ""))
	}
	rb := startBinary(t, devBinary(t), t.TempDir())
	base := strings.TrimSuffix(rb.apiURL, "/api/v1")
	// The trailing space keeps ./bin/treasury-dev, were a block to run it, from matching.
	text := strings.NewReplacer("http://127.0.0.1:8080", base, ".data/credentials.json", rb.credsPath,
		"./bin/treasury ", treasuryBinary(t)+" ",
		"go run ./examples/payout-job", filepath.Join(buildExamples(t), "payout-job")).Replace(script.String())
	tour := exec.Command("bash", "-c", text)
	tour.Dir = t.TempDir()                                // where the tour's files (payouts.csv) go, and go again
	tour.Env = append(os.Environ(), "TREASURY_URL="+base) // the payout job's default is the README's address
	out, err := tour.CombinedOutput()
	if err != nil {
		t.Fatalf("the tour failed: %v\n%s", err, out)
	}
	if left, _ := os.ReadDir(tour.Dir); len(left) > 0 {
		t.Errorf("the tour leaves %s in the directory it ran in", left[0].Name())
	}
	for marker, times := range map[string]int{
		`"totalUsd":"34550000.00"`:         1,
		`"code":"unauthenticated"`:         1,
		`"code":"permission_denied"`:       1,
		`"code":"maker_checker_violation"`: 1,
		`"event":"Order.Confirmed"`:        1,
		`"code":"conflict"`:                1,
		`"status":"published"`:             1,
		`"app":"earn","version":2`:         1,
	} {
		if got := strings.Count(string(out), marker); got < times {
			t.Errorf("the tour printed %s %d times, want at least %d", marker, got, times)
		}
	}
	// Two payments read back confirmed, whatever the order of their answers' keys.
	if got := confirmedOrders(string(out)); got < 2 {
		t.Errorf("the tour read %d confirmed orders, want at least 2", got)
	}
	// The earn policy's change is its maximum alone: no rule dropped on the way.
	if strings.Contains(string(out), `"kind":"removed"`) {
		t.Error("the tour's policy change removed a rule")
	}
	// The file of payouts, paid by the first run and found again, not paid, by the second.
	reports := regexp.MustCompile(`(?m)^inv-000[12],(ord_\w+),confirmed,0x[0-9a-f]{64},$`).FindAllStringSubmatch(string(out), -1)
	if len(reports) != 4 || reports[0][1] != reports[2][1] || reports[1][1] != reports[3][1] || reports[0][1] == reports[1][1] {
		t.Errorf("the payout file's two runs reported %v", reports)
	}
	// The tail's own lines (not the REST answers, which are JSON): one payment seen live
	// from creation to confirmation.
	if !strings.Contains(string(out), "connected to wsc_") {
		t.Error("the tail never reported its connection")
	}
	// Not anchored to the line's start: a curl answer without a final newline may precede.
	created := regexp.MustCompile(`Z  Order\.Created +(ord_\w+)  draft\n`).FindStringSubmatch(string(out))
	if created == nil {
		t.Error("the tail printed no Order.Created line")
	} else if !regexp.MustCompile(`Z  Order\.Confirmed +` + created[1] + `  confirmed\n`).MatchString(string(out)) {
		t.Errorf("the tail printed no Order.Confirmed line for %s", created[1])
	}
	if t.Failed() {
		t.Logf("tour output:\n%s", out)
	}
}

// treasuryBinary is the production binary: the one make test-e2e passes, or one built
// here (it holds no Temporal server, so this takes seconds).
func treasuryBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("TREASURY_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "treasury")
	build := exec.Command("go", "build", "-o", bin, "github.com/opentreasury/treasury/cmd/treasury")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// confirmedOrders counts the orders in out, as the API answers them, that are confirmed:
// every JSON object whose id is an order's.
func confirmedOrders(out string) int {
	n := 0
	for i := range out {
		if out[i] != '{' {
			continue
		}
		var o struct{ ID, Status string }
		if json.NewDecoder(strings.NewReader(out[i:])).Decode(&o) == nil && strings.HasPrefix(o.ID, "ord_") && o.Status == "confirmed" {
			n++
		}
	}
	return n
}
