package webhook

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKeyFileIsMadeOnceAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhook-key")
	first, err := KeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseKey(first); err != nil {
		t.Fatalf("made key %q: %v", first, err)
	}
	again, err := KeyFile(path)
	if err != nil || again != first {
		t.Fatalf("read again %q %v, want %q", again, err, first)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v %v, want 600", fi.Mode().Perm(), err)
	}
}
