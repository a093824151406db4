package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeTour runs the shell blocks of the README's "A short tour" against the real
// binary, as a newcomer would paste them: the portfolio, a 500 USDC payment confirmed, a
// 20,000 USDC payment the maker may not approve but the approver may, confirmed too.
// Only the address and the credentials path change, to a free port and a temp directory.
func TestReadmeTour(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README tour needs %s", tool)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tour := string(readme)
	start := strings.Index(tour, "## A short tour")
	end := strings.Index(tour, "## Documentation")
	if start < 0 || end < start {
		t.Fatal("the README has no tour section")
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(tour[start:end], -1) {
		script.WriteString(m[1])
	}
	rb := startBinary(t, devBinary(t), t.TempDir())
	base := strings.TrimSuffix(rb.apiURL, "/api/v1")
	text := strings.NewReplacer("http://127.0.0.1:8080", base, ".data/credentials.json", rb.credsPath).Replace(script.String())
	out, err := exec.Command("bash", "-c", text).CombinedOutput()
	if err != nil {
		t.Fatalf("the tour failed: %v\n%s", err, out)
	}
	for marker, times := range map[string]int{
		`"totalUsd":"31050000.00"`:           1,
		`"code":"unauthenticated"`:           1,
		`"code":"permission_denied"`:         1,
		`"code":"maker_checker_violation"`:   1,
		`"event":"Order.Confirmed"`:          1,
		`"status":"confirmed","submittedAt"`: 2,
	} {
		if got := strings.Count(string(out), marker); got < times {
			t.Errorf("the tour printed %s %d times, want at least %d", marker, got, times)
		}
	}
	if t.Failed() {
		t.Logf("tour output:\n%s", out)
	}
}
