package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// exportAuditLog saves the seeded organisation's audit chain as the dashboard exports it,
// after a few payments have added to it.
func exportAuditLog(t *testing.T) (file string, lines [][]byte) {
	t.Helper()
	a := startLiveAPI(t)
	for range 3 {
		status, out := a.call(t, "POST", "/api/v1/payments", a.creds.Keys["pay"].SK, map[string]any{"walletId": a.creds.Wallets[0].ID,
			"asset": "USDC", "amount": "5", "destination": map[string]any{"address": "0x1111111111111111111111111111111111111111"}})
		if status != 201 {
			t.Fatalf("payment: %d %v", status, out)
		}
	}
	req, _ := http.NewRequest("GET", a.url+"/api/v1/audit-logs/export", nil)
	req.Header.Set("Authorization", "Bearer "+a.creds.Keys["treasury"].Read)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("export: %d %s", res.StatusCode, body)
	}
	file = filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, bytes.SplitAfter(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
}

// auditVerify runs treasury audit verify with args, stdin as its standard input.
func auditVerify(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	auditFlags.head = ""
	var out, errs bytes.Buffer
	code = runIn(append([]string{"audit", "verify"}, args...), commandEnv{getenv: func(string) string { return "" },
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errs})
	return code, out.String(), errs.String()
}

func TestAuditVerifyFindsAnExportIntactOrNamesItsFirstBrokenEntry(t *testing.T) {
	file, lines := exportAuditLog(t)
	n := len(lines)
	if n < 4 {
		t.Fatalf("the seeding and three payments: %d lines", n)
	}
	for _, l := range lines[n-3:] {
		if !bytes.Contains(l, []byte(`"payment.created"`)) {
			t.Fatalf("the export does not end with the three payments: %s", l)
		}
	}
	code, stdout, stderr := auditVerify(t, "", file)
	intact := regexp.MustCompile(fmt.Sprintf(`^intact: %d entries, head %d ([0-9a-f]{64})\n$`, n, n)).FindStringSubmatch(stdout)
	if code != 0 || intact == nil || stderr != "" {
		t.Fatalf("intact file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	head := intact[1]

	// From standard input, and against a head kept from before.
	if code, stdout, _ := auditVerify(t, string(bytes.Join(lines, nil)), "--head", "2:"+hashOf(t, lines[1]), "-"); code != 0 || !strings.HasPrefix(stdout, fmt.Sprintf("intact: %d entries", n)) {
		t.Fatalf("stdin with a kept head: exit %d %q", code, stdout)
	}
	// A window: its first link is not in the file, and it says so.
	if code, stdout, _ := auditVerify(t, string(bytes.Join(lines[2:], nil)), "-"); code != 0 || !strings.Contains(stdout, "from seq 3") {
		t.Fatalf("a window: exit %d %q", code, stdout)
	}

	// The payments are the last three lines, seq n-2 to n.
	first, second, last := lines[n-3], lines[n-2], lines[n-1]
	before := lines[:n-3]
	join := func(parts ...[]byte) []byte { return bytes.Join(append(slices.Clone(before), parts...), nil) }
	for name, c := range map[string]struct {
		file []byte
		args []string
		want string
	}{
		"a line edited": {file: join(first, bytes.Replace(second, []byte(`"amount":"5"`), []byte(`"amount":"5000"`), 1), last),
			want: fmt.Sprintf(`broken at seq %d \(aud_\w+\), line %d: hash_mismatch`, n-1, n-1)},
		"a line deleted":  {file: join(first, last), want: fmt.Sprintf(`broken at seq %d \(aud_\w+\), line %d: seq_gap`, n, n-1)},
		"lines reordered": {file: join(second, first, last), want: fmt.Sprintf(`broken at seq %d \(aud_\w+\), line %d: seq_gap`, n-1, n-2)},
		"the last line cut, against the kept head": {file: join(first, second), args: []string{"--head", fmt.Sprintf("%d:%s", n, head)},
			want: fmt.Sprintf(`broken at seq %d: head_mismatch`, n)},
		"not an export": {file: []byte("{}\n"), want: `broken at line 1: malformed`},
	} {
		args := append(c.args, "-")
		code, stdout, stderr := auditVerify(t, string(c.file), args...)
		if code != 1 || stdout != "" || !regexp.MustCompile(`^treasury audit verify: (`+c.want+`)`).MatchString(stderr) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, stdout, stderr)
		}
	}
}

func TestAuditVerifyRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{{}, {"a", "b"}, {"--head", "4", "-"}, {"--head", "x:" + strings.Repeat("a", 64), "-"}} {
		if code, _, stderr := auditVerify(t, "", args...); code != 2 || stderr == "" {
			t.Errorf("%q: exit %d %q", args, code, stderr)
		}
	}
	if code, _, stderr := auditVerify(t, "", filepath.Join(t.TempDir(), "missing.jsonl")); code != 1 || !strings.Contains(stderr, "no such file") {
		t.Errorf("a missing file: exit %d %q", code, stderr)
	}
}

// hashOf is the hash of an export's line.
func hashOf(t *testing.T, line []byte) string {
	t.Helper()
	m := regexp.MustCompile(`"hash":"([0-9a-f]{64})"`).FindSubmatch(line)
	if m == nil {
		t.Fatalf("no hash in %s", line)
	}
	return string(m[1])
}
