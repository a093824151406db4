//go:build !linux

package wshub

import (
	"errors"
	"fmt"
	"syscall"
)

// sendRing batches sends through io_uring on Linux; elsewhere every frame is written with
// its own system call.
type sendRing struct{ batch sendBatch }

func newSendRing() (*sendRing, error) {
	return nil, fmt.Errorf("%w: Linux only", errRingUnsupported)
}

func (r *sendRing) close() {}

func (r *sendRing) send(fds []int32, bufs [][]byte, res []int32) error {
	return errors.New("io_uring: Linux only")
}

func socketError(syscall.Errno) bool { return true }
