package assemble

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

// keysOf counts the keys of one JSON object line, duplicates included (a map would keep
// one of each).
func keysOf(t *testing.T, line []byte) map[string]int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", line)
	}
	keys := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys[tok.(string)]++
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// A process whose logger already names it (treasury-dev, the cluster's launcher) logs
// each line with one "process" key: strict JSON readers refuse a repeated key.
func TestAProcessLogsItsNameOnce(t *testing.T) {
	var buf bytes.Buffer
	named := slog.New(slog.NewJSONHandler(&buf, nil)).With("process", "treasury-dev")
	p := NewProcess(Config{}, "dev", named)
	p.Log.Info("started")
	p.Group.Log.Info("stopping")
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if keys := keysOf(t, line); keys["process"] != 1 {
			t.Fatalf("%d process keys in %s", keys["process"], line)
		}
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"process":"treasury-dev"`)) {
		t.Fatalf("the process is not named: %s", buf.Bytes())
	}
}
