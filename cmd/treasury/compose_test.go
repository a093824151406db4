package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/opentreasury/treasury/internal/assemble"
)

// composeService holds the parts of a compose service the binary cares about; the
// untyped fields accept both of compose's short and long forms.
type composeService struct {
	Build       any `yaml:"build"`
	Entrypoint  any `yaml:"entrypoint"`
	Command     any `yaml:"command"`
	Environment any `yaml:"environment"`
	DependsOn   any `yaml:"depends_on"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

// parseCompose decodes a compose document; yaml.v3 resolves anchors and "<<" merge keys.
func parseCompose(data []byte) (composeFile, error) {
	var f composeFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return f, err
	}
	if len(f.Services) == 0 {
		return f, fmt.Errorf("no services")
	}
	return f, nil
}

// checkCompose returns one line per way a service built from our Dockerfile would fail
// to start the treasury binary as written.
func checkCompose(f composeFile) []string {
	var problems []string
	names := make([]string, 0, len(f.Services))
	for name := range f.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		svc := f.Services[name]
		if svc.Build == nil {
			continue
		}
		for _, p := range checkService(svc) {
			problems = append(problems, name+": "+p)
		}
	}
	return problems
}

func checkService(svc composeService) []string {
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	env, envErr := environment(svc.Environment)
	if envErr != nil {
		report("environment: %v", envErr)
	}
	known := assemble.EnvVarNames()
	for key := range env {
		if !slices.Contains(known, key) {
			report("unknown environment variable %s", key)
		}
	}
	// Compose interpolates "$" from the host at run time, so only literal values are checked.
	literal := map[string]string{}
	for k, v := range env {
		if v != nil && !strings.Contains(*v, "$") {
			literal[k] = *v
		}
	}
	cfg, err := assemble.ConfigFromEnv(func(k string) string { return literal[k] })
	if err != nil {
		report("environment rejected: %v", err)
	}

	if svc.Entrypoint != nil {
		report("entrypoint is overridden, so command is not the treasury binary's arguments")
	}
	args, err := words(svc.Command)
	if err != nil {
		report("command: %v", err)
		return problems
	}
	if len(args) == 0 {
		report("no command: the binary would only print its usage")
		return problems
	}
	cmd, rest := findCommand(args)
	if cmd == nil {
		report("unknown command %q", strings.Join(args, " "))
		return problems
	}
	fs := newFlagSet(cmd, &cfg, io.Discard)
	unknownFlag := false
	for _, a := range rest {
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if fs.Lookup(name) == nil {
			report("command %q has no flag %q", strings.Join(cmd.words, " "), a)
			unknownFlag = true
		}
	}
	// Parsing as run does also catches stray arguments and bad flag values.
	if !unknownFlag {
		if err := fs.Parse(rest); err != nil {
			report("arguments %q: %v", rest, err)
		} else if fs.NArg() > 0 {
			report("unexpected arguments %q", fs.Args())
		}
	}
	return problems
}

// words returns a compose command in list form; a string is split on spaces, and quoting
// (which compose would honour) is refused rather than guessed at.
func words(command any) ([]string, error) {
	switch c := command.(type) {
	case nil:
		return nil, nil
	case string:
		if strings.ContainsAny(c, `"'\`) {
			return nil, fmt.Errorf("quoted string form %q: use the list form", c)
		}
		return strings.Fields(c), nil
	case []any:
		out := make([]string, len(c))
		for i, w := range c {
			s, ok := w.(string)
			if !ok {
				return nil, fmt.Errorf("element %d is %T, not a string", i, w)
			}
			out[i] = s
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unexpected %T", command)
	}
}

// environment returns a compose environment as name -> value; nil means the value is
// taken from the host at run time.
func environment(env any) (map[string]*string, error) {
	out := map[string]*string{}
	switch e := env.(type) {
	case nil:
	case map[string]any:
		for k, v := range e {
			if v == nil {
				out[k] = nil
				continue
			}
			// Compose turns YAML numbers and booleans into their text, as does Sprint.
			s := fmt.Sprint(v)
			out[k] = &s
		}
	case []any:
		for i, item := range e {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("item %d is %T, not KEY=VALUE", i, item)
			}
			k, v, found := strings.Cut(s, "=")
			if found {
				out[k] = &v
			} else {
				out[k] = nil
			}
		}
	default:
		return nil, fmt.Errorf("unexpected %T", env)
	}
	return out, nil
}

// dependsOnCondition returns the condition on which svc waits for dep; the list form
// means service_started.
func dependsOnCondition(svc composeService, dep string) (string, bool) {
	switch d := svc.DependsOn.(type) {
	case []any:
		for _, x := range d {
			if x == dep {
				return "service_started", true
			}
		}
	case map[string]any:
		v, ok := d[dep]
		if !ok {
			return "", false
		}
		if m, ok := v.(map[string]any); ok {
			if c, ok := m["condition"].(string); ok {
				return c, true
			}
		}
		return "service_started", true
	}
	return "", false
}

func TestComposeMatchesBinary(t *testing.T) {
	data, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseCompose(data)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, p := range checkCompose(f) {
		t.Errorf("docker-compose.yml: %s", p)
	}

	for _, name := range []string{"api", "worker", "migrate"} {
		svc, ok := f.Services[name]
		if !ok {
			t.Errorf("service %s is missing", name)
			continue
		}
		if svc.Build == nil {
			t.Errorf("service %s is not built from our Dockerfile", name)
		}
	}
	for _, name := range []string{"api", "worker"} {
		cond, ok := dependsOnCondition(f.Services[name], "migrate")
		if !ok || cond != "service_completed_successfully" {
			t.Errorf("service %s: depends_on migrate with condition %q, want service_completed_successfully", name, cond)
		}
	}
}

func TestDockerfileBuildsTreasury(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// The word boundary keeps ./cmd/treasury-dev, which links the Temporal server, from passing.
	build := regexp.MustCompile(`(?m)go build .*\./cmd/treasury(\s|$)`)
	if !build.Match(data) {
		t.Error("Dockerfile does not build ./cmd/treasury")
	}
	if !strings.Contains(string(data), `ENTRYPOINT ["/treasury"]`) {
		t.Error(`Dockerfile entrypoint is not ["/treasury"]; compose commands assume it`)
	}
}

// TestCheckComposeReportsMistakes proves the checker can fail, so a green
// TestComposeMatchesBinary means something.
func TestCheckComposeReportsMistakes(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // substrings, one problem each; none means a clean document
	}{
		{
			name: "clean, with anchors and merge keys",
			doc: `
x-env: &env
  DATABASE_URL: postgres://u:p@db/t
  SHUTDOWN_TIMEOUT: 8s
x-svc: &svc
  build: .
  environment: *env
services:
  db:
    image: postgres:16
    command: postgres -c fsync=off
    environment: {NOT_OURS: "1"}
  api:
    <<: *svc
    command: ["api", "--http-addr=:9090"]
    environment:
      <<: *env
      HTTP_ADDR: ":8080"
  setup:
    <<: *svc
    command: temporal setup
    environment: ["TEMPORAL_ADDRESS=temporal:7233", "TEMPORAL_API_KEY"]
`,
		},
		{
			name: "unknown command",
			doc:  "services:\n  a:\n    build: .\n    command: serve\n",
			want: []string{`a: unknown command "serve"`},
		},
		{
			name: "missing command",
			doc:  "services:\n  a:\n    build: .\n",
			want: []string{"a: no command"},
		},
		{
			name: "unknown flag",
			doc:  "services:\n  a:\n    build: .\n    command: [worker, -http-addr, ':8080']\n",
			want: []string{`a: command "worker" has no flag "-http-addr"`},
		},
		{
			name: "stray argument",
			doc:  "services:\n  a:\n    build: .\n    command: api extra\n",
			want: []string{`a: unexpected arguments ["extra"]`},
		},
		{
			name: "unknown environment variable, map form",
			doc:  "services:\n  a:\n    build: .\n    command: api\n    environment:\n      TEMPORAL_HOST: t:7233\n",
			want: []string{"a: unknown environment variable TEMPORAL_HOST"},
		},
		{
			name: "unknown environment variable, list form",
			doc:  "services:\n  a:\n    build: .\n    command: api\n    environment: [DB_URL=postgres://x]\n",
			want: []string{"a: unknown environment variable DB_URL"},
		},
		{
			name: "bad environment value",
			doc:  "services:\n  a:\n    build: .\n    command: api\n    environment:\n      SHUTDOWN_TIMEOUT: 8\n",
			want: []string{"a: environment rejected: configuration: SHUTDOWN_TIMEOUT"},
		},
		{
			name: "entrypoint override",
			doc:  "services:\n  a:\n    build: .\n    entrypoint: /bin/sh\n    command: api\n",
			want: []string{"a: entrypoint is overridden"},
		},
		{
			name: "all at once",
			doc: `
services:
  a: {build: ., command: frobnicate}
  b: {build: ., command: [api, --port=1]}
  c: {build: ., command: migrate, environment: {POSTGRES_URL: x}}
`,
			want: []string{
				`a: unknown command "frobnicate"`,
				`b: command "api" has no flag "--port=1"`,
				"c: unknown environment variable POSTGRES_URL",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseCompose([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			got := checkCompose(f)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems %q, want %d matching %q", len(got), got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i, got[i], w)
				}
			}
		})
	}
}
