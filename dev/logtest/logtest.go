// Package logtest captures log output in tests that write it from several goroutines.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer safe for concurrent use; String returns all that was written.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
