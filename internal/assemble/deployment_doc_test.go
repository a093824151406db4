package assemble

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDeploymentDocumentsEveryVariable holds the configuration table of docs/deployment.md
// (rows of | `NAME` | `default` or — | what it does |) to EnvVars: every variable the
// service reads is there with its default, and the table names none it does not read.
func TestDeploymentDocumentsEveryVariable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Configuration\n")
	if !ok {
		t.Fatal("docs/deployment.md has no Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	name := regexp.MustCompile("`([A-Z0-9_]+)`")
	documented := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		def := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if def == "—" {
			def = ""
		}
		for _, m := range name.FindAllStringSubmatch(cells[0], -1) {
			documented[m[1]] = def
		}
	}
	for _, v := range EnvVars {
		// The token of the client commands (treasury signer, events tail) is documented
		// with them, not as the service's configuration.
		if v.Name == "TREASURY_TOKEN" {
			continue
		}
		def, ok := documented[v.Name]
		switch {
		case !ok:
			t.Errorf("docs/deployment.md does not document %s", v.Name)
		case def != v.Default:
			t.Errorf("docs/deployment.md gives %s the default %q; it is %q", v.Name, def, v.Default)
		}
		delete(documented, v.Name)
	}
	for n := range documented {
		t.Errorf("docs/deployment.md documents %s, which the service does not read", n)
	}
}
