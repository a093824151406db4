package wshub

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// A sendRing writes a chunk of frames, each into its own socket, with one system call:
// a small io_uring (Linux 5.4 and later) whose every entry is a non-blocking send. A
// fan-out makes one send per connection, and on virtual machines a system call's entry
// and exit can cost more than the send itself, so this is most of what one frame costs
// the server that is not the kernel's TCP work.
//
// Where io_uring is missing or refused (a kernel before 5.11, kernel.io_uring_disabled,
// a container's seccomp profile), newSendRing fails and the hub writes each frame with
// its own system call.
type sendRing struct {
	fd      int
	ringMem []byte
	sqeMem  []byte

	sqHead, sqTail *uint32
	sqMask         uint32
	sqes           []ioUringSQE
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []ioUringCQE

	// op is the operation of every entry: a send (tests set another to see the ring
	// refuse it).
	op uint8
	// waitArg and waitTimeout bound a submission's wait; inflight holds the buffers of
	// the sends under way.
	waitArg     ioUringGeteventsArg
	waitTimeout kernelTimespec
	inflight    [][]byte

	// batch is the fan-out's scratch for one chunk, kept with the ring so that a chunk
	// allocates nothing.
	batch sendBatch
}

// Linux's io_uring ABI (include/uapi/linux/io_uring.h).
const (
	sysIOUringSetup = 425
	sysIOUringEnter = 426

	ioUringOffSQRing = 0
	ioUringOffSQEs   = 0x10000000

	ioUringFeatSingleMmap = 1 << 0
	ioUringFeatExtArg     = 1 << 8 // Linux 5.11
	ioUringEnterGetEvents = 1 << 0
	ioUringEnterExtArg    = 1 << 3
	ioUringOpSend         = 26

	msgDontWait = 0x40
	msgNoSignal = 0x4000
)

type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

type ioUringSQE struct {
	opcode, flags         uint8
	ioprio                uint16
	fd                    int32
	off, addr             uint64
	len, msgFlags         uint32
	userData              uint64
	bufIndex, personality uint16
	spliceFdIn            int32
	addr3, _              uint64
}

type ioUringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// The kernel's sizes; a mismatch fails the build.
var (
	_ [120 - unsafe.Sizeof(ioUringParams{})]byte
	_ [unsafe.Sizeof(ioUringParams{}) - 120]byte
	_ [64 - unsafe.Sizeof(ioUringSQE{})]byte
	_ [unsafe.Sizeof(ioUringSQE{}) - 64]byte
	_ [16 - unsafe.Sizeof(ioUringCQE{})]byte
	_ [unsafe.Sizeof(ioUringCQE{}) - 16]byte
)

// newSendRing sets up a ring of sendChunk entries. An error that wraps
// errRingUnsupported means no ring will ever work here.
func newSendRing() (*sendRing, error) {
	var p ioUringParams
	fd, _, errno := syscall.RawSyscall(sysIOUringSetup, sendChunk, uintptr(unsafe.Pointer(&p)), 0)
	switch errno {
	case 0:
	case syscall.ENOSYS, syscall.EPERM, syscall.EACCES, syscall.EINVAL, syscall.EOPNOTSUPP:
		return nil, fmt.Errorf("%w: io_uring_setup: %v", errRingUnsupported, errno)
	default:
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &sendRing{fd: int(fd), op: ioUringOpSend}
	// 5.11 and later: sends exist (5.6), rings share one mapping (5.4), a send with
	// MSG_DONTWAIT that finds the socket full completes with EAGAIN rather than waiting,
	// and a wait can have a time limit.
	if p.features&ioUringFeatSingleMmap == 0 || p.features&ioUringFeatExtArg == 0 || p.sqEntries < sendChunk {
		r.close()
		return nil, fmt.Errorf("%w: kernel older than 5.11", errRingUnsupported)
	}
	size := max(int(p.sqOff.array+p.sqEntries*4), int(p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(ioUringCQE{}))))
	var err error
	if r.ringMem, err = syscall.Mmap(r.fd, ioUringOffSQRing, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring rings: %w", err)
	}
	if r.sqeMem, err = syscall.Mmap(r.fd, ioUringOffSQEs, int(p.sqEntries)*int(unsafe.Sizeof(ioUringSQE{})), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring entries: %w", err)
	}
	base := unsafe.Pointer(unsafe.SliceData(r.ringMem))
	r.sqHead = (*uint32)(unsafe.Add(base, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(base, p.sqOff.tail))
	r.sqMask = *(*uint32)(unsafe.Add(base, p.sqOff.ringMask))
	r.cqHead = (*uint32)(unsafe.Add(base, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(base, p.cqOff.tail))
	r.cqMask = *(*uint32)(unsafe.Add(base, p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*ioUringCQE)(unsafe.Add(base, p.cqOff.cqes)), p.cqEntries)
	r.sqes = unsafe.Slice((*ioUringSQE)(unsafe.Pointer(unsafe.SliceData(r.sqeMem))), p.sqEntries)
	// Entry i of the submission array always names SQE i: the ring is filled in order.
	array := unsafe.Slice((*uint32)(unsafe.Add(base, p.sqOff.array)), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.waitTimeout = kernelTimespec{sec: int64(ringWait / time.Second)}
	r.waitArg.ts = uint64(uintptr(unsafe.Pointer(&r.waitTimeout)))
	if err := r.probe(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// probe sends one byte over a socket pair: a kernel or sandbox that has io_uring but
// refuses its sends (gVisor, a security module) is found here, not by failing clients.
func (r *sendRing) probe() error {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("io_uring probe: %w", err)
	}
	defer syscall.Close(pair[0])
	defer syscall.Close(pair[1])
	res := []int32{0}
	if err := r.send([]int32{int32(pair[0])}, [][]byte{make([]byte, 1)}, res); err != nil {
		return fmt.Errorf("%w: probe: %v", errRingUnsupported, err)
	}
	if res[0] != 1 {
		return fmt.Errorf("%w: a send over a socket pair gave %d", errRingUnsupported, res[0])
	}
	return nil
}

func (r *sendRing) close() {
	if r.fd < 0 {
		return
	}
	if r.sqeMem != nil {
		_ = syscall.Munmap(r.sqeMem)
	}
	if r.ringMem != nil {
		_ = syscall.Munmap(r.ringMem)
	}
	_ = syscall.Close(r.fd)
	r.fd, r.sqeMem, r.ringMem = -1, nil, nil
}

// ringWait bounds how long a submission may wait for its sends to complete. With
// MSG_DONTWAIT they complete while the submission runs; the bound is there so that a
// kernel that behaves otherwise costs a few connections, never a stuck fan-out.
const ringWait = 5 * time.Second

type ioUringGeteventsArg struct {
	sigmask              uint64
	sigmaskSz, minWaitUs uint32
	ts                   uint64
}

type kernelTimespec struct{ sec, nsec int64 }

// stranded keeps the buffers of sends whose outcome a failed ring could not report: the
// kernel may still read them, so the collector must never free them. It happens at most
// once per ring, and rings are given up after the first failure.
var stranded struct {
	sync.Mutex
	bufs [][]byte
}

// send writes bufs[i] into socket fds[i] without waiting, for every i (at most
// sendChunk), and sets res[i] to the bytes written or to minus the errno. It returns once
// every send has completed: the kernel holds none of the buffers afterwards. If the ring
// fails it returns an error, and sets res[i] to notSubmitted for sends the kernel never
// took (the caller may write those itself) and to unknownSend for those whose outcome is
// unknown.
func (r *sendRing) send(fds []int32, bufs [][]byte, res []int32) error {
	// Kept in the ring while the kernel may read them: this also makes them escape to
	// the heap, where the collector never moves them (a goroutine stack may move).
	r.inflight = bufs
	n := uint32(len(fds))
	tail := atomic.LoadUint32(r.sqTail)
	for i := range n {
		b := bufs[i]
		r.sqes[(tail+i)&r.sqMask] = ioUringSQE{
			opcode: r.op, fd: fds[i],
			addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), len: uint32(len(b)),
			msgFlags: msgDontWait | msgNoSignal, userData: uint64(i),
		}
		res[i] = notSubmitted
	}
	atomic.StoreUint32(r.sqTail, tail+n)

	var (
		done    uint32
		err     error
		retries int
	)
wait:
	for done < n {
		unsubmitted := tail + n - atomic.LoadUint32(r.sqHead)
		_, _, errno := syscall.Syscall6(sysIOUringEnter, uintptr(r.fd), uintptr(unsubmitted), uintptr(n-done),
			ioUringEnterGetEvents|ioUringEnterExtArg, uintptr(unsafe.Pointer(&r.waitArg)), unsafe.Sizeof(r.waitArg))
		head, cqTail := atomic.LoadUint32(r.cqHead), atomic.LoadUint32(r.cqTail)
		for ; head != cqTail; head++ {
			cqe := &r.cqes[head&r.cqMask]
			if cqe.userData < uint64(n) {
				res[cqe.userData] = cqe.res
				done++
			}
		}
		atomic.StoreUint32(r.cqHead, head)
		switch errno {
		case 0, syscall.EINTR:
			continue
		case syscall.EAGAIN, syscall.EBUSY, syscall.ENOMEM:
			if retries++; retries <= 3 {
				continue
			}
		}
		err = fmt.Errorf("io_uring_enter: %w", errno)
		break wait
	}
	if err == nil {
		r.inflight = nil
		return nil
	}
	// The sends the kernel took and has not completed may still read their buffers.
	taken := atomic.LoadUint32(r.sqHead) - tail
	stranded.Lock()
	defer stranded.Unlock()
	for i := range n {
		if res[i] == notSubmitted && i < taken {
			res[i] = unknownSend
			stranded.bufs = append(stranded.bufs, bufs[i])
		}
	}
	return err
}

// socketError reports whether a failed send's errno is the socket's (the connection is
// broken) rather than the ring's.
func socketError(errno syscall.Errno) bool {
	switch errno {
	case syscall.EPIPE, syscall.ECONNRESET, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH,
		syscall.ENOTCONN, syscall.ECONNABORTED, syscall.ENETDOWN, syscall.EHOSTDOWN, syscall.ECONNREFUSED:
		return true
	}
	return false
}
