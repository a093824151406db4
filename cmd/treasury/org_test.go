package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// operatorRun runs an operator's command against the SQLite database at path.
func operatorRun(t *testing.T, path string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	env := map[string]string{"SQLITE_PATH": path, "PUBLIC_URL": "https://treasury.example.com"}
	var out, errs bytes.Buffer
	code = runIn(args, commandEnv{getenv: func(k string) string { return env[k] }, stdin: strings.NewReader(""),
		stdout: &out, stderr: &errs})
	return code, out.String(), errs.String()
}

// The operator makes an organisation on an empty database and is given its owner's
// sign-in link; lists it; gives a new link; disables it. Mistakes are told apart: a
// missing flag is a usage error (2), a refusal an error (1).
func TestTheOperatorsCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "treasury.db")
	code, stdout, stderr := operatorRun(t, db, "org", "create", "--name", "Acme Payroll", "--owner-email", "ops@acme.example", "--json")
	var made linkAnswer
	if code != 0 || json.Unmarshal([]byte(stdout), &made) != nil || !strings.HasPrefix(made.OrgID, "org_") ||
		made.Email != "ops@acme.example" || !strings.HasPrefix(made.SignInLink, "https://treasury.example.com/console/welcome?token=sil_") {
		t.Fatalf("org create: %d %s %s", code, stdout, stderr)
	}
	if code, _, stderr := operatorRun(t, db, "org", "create", "--name", "Twice", "--owner-email", "OPS@acme.example"); code != 1 ||
		!strings.Contains(stderr, "already signs in with this e-mail address") {
		t.Fatalf("an owner address in use: %d %s", code, stderr)
	}
	if code, _, stderr := operatorRun(t, db, "org", "create", "--name", "No owner"); code != 2 || !strings.Contains(stderr, "--owner-email") {
		t.Fatalf("without --owner-email: %d %s", code, stderr)
	}
	if code, _, stderr := operatorRun(t, db, "org", "create", "--name", "Bad", "--owner-email", "b@acme.example", "--public-url", "treasury.example.com"); code != 2 ||
		!strings.Contains(stderr, "--public-url") {
		t.Fatalf("a public URL without its scheme: %d %s", code, stderr)
	}
	if code, _, stderr := operatorRun(t, db, "org", "create", "--name", "Bad\nAddress: 0xevil", "--owner-email", "b@acme.example"); code != 1 ||
		!strings.Contains(stderr, "control character") {
		t.Fatalf("a name with a line break: %d %s", code, stderr)
	}
	if code, _, stderr := operatorRun(t, db, "org", "create", "--name", "Bad", "--owner-email", "not an address"); code != 1 ||
		!strings.Contains(stderr, "--owner-email must be an e-mail address") {
		t.Fatalf("a bad address: %d %s", code, stderr)
	}

	code, stdout, stderr = operatorRun(t, db, "user", "reset", "--email", "ops@acme.example")
	if code != 0 || !strings.Contains(stdout, "sign-in link  https://treasury.example.com/console/welcome?token=sil_") ||
		strings.Contains(stdout, made.SignInLink) {
		t.Fatalf("user reset: %d %s %s", code, stdout, stderr)
	}
	if code, _, stderr := operatorRun(t, db, "user", "reset", "--email", "nobody@acme.example"); code != 1 || !strings.Contains(stderr, "Nobody signs in") {
		t.Fatalf("reset of nobody: %d %s", code, stderr)
	}

	code, stdout, _ = operatorRun(t, db, "org", "list")
	if code != 0 || !strings.Contains(stdout, made.OrgID) || !strings.Contains(stdout, "Acme Payroll") || !strings.Contains(stdout, "active") {
		t.Fatalf("org list: %d %s", code, stdout)
	}
	code, stdout, stderr = operatorRun(t, db, "org", "disable", made.OrgID)
	if code != 0 || !strings.Contains(stdout, made.OrgID+" (Acme Payroll) disabled at") {
		t.Fatalf("org disable: %d %s %s", code, stdout, stderr)
	}
	code, stdout, _ = operatorRun(t, db, "org", "list", "--json")
	var listed orgJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &listed) != nil || listed.ID != made.OrgID || listed.DisabledAt == nil || listed.People != 1 {
		t.Fatalf("org list --json after disable: %d %s", code, stdout)
	}
	if code, _, stderr := operatorRun(t, db, "org", "disable", "org_unknown"); code != 1 || !strings.Contains(stderr, "No organisation") {
		t.Fatalf("disable an unknown organisation: %d %s", code, stderr)
	}
	if code, _, stderr := operatorRun(t, db, "user", "reset", "--email", "ops@acme.example"); code != 1 || !strings.Contains(stderr, "disabled") {
		t.Fatalf("a link for a disabled organisation's person: %d %s", code, stderr)
	}
	if code, _, _ := operatorRun(t, db, "org", "disable"); code != 2 {
		t.Fatalf("disable without an organisation: %d", code)
	}
}
