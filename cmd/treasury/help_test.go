package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/opentreasury/treasury/internal/assemble"
)

// A command's -h lists its own flags, then the variables it reads: a server all of them,
// any other command only its own.
func TestEachCommandsHelpListsItsFlagsThenItsOwnVariables(t *testing.T) {
	known := assemble.EnvVarNames()
	for _, c := range commands {
		name := strings.Join(c.words, " ")
		for _, v := range c.env {
			if !slices.Contains(known, v) {
				t.Errorf("%s names %s, which is not an environment variable of the binary", name, v)
			}
		}
		var out bytes.Buffer
		if code := run(append(slices.Clone(c.words), "-h"), func(string) string { return "" }, &out, &out); code != 0 {
			t.Fatalf("%s -h: exit %d\n%s", name, code, out.String())
		}
		help := out.String()
		if !strings.HasPrefix(help, "Usage: treasury "+name+" ") {
			t.Errorf("%s -h begins %q", name, help[:min(len(help), 60)])
		}
		env := strings.Index(help, "\nEnvironment")
		if flags := strings.Index(help, "\nFlags:"); env < 0 || flags < 0 || flags > env {
			t.Errorf("%s -h: flags at %d, environment at %d", name, flags, env)
		}
		for _, v := range known {
			listed := strings.Contains(help, "\n  "+v+" ")
			if want := c.server || slices.Contains(c.env, v); listed != want {
				t.Errorf("%s -h lists %s: %v, want %v", name, v, listed, want)
			}
		}
	}
}
