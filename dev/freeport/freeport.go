// Package freeport picks TCP ports for servers that bind them some time after they are
// chosen (the embedded Temporal server, the processes of a local cluster), and waits for
// such a server to open.
//
// A port the kernel hands out for :0 comes from the ephemeral range, which every
// outgoing connection draws from too, so it can be taken between the choice and the
// bind. Ports are therefore drawn from below that range, and never twice in one process.
package freeport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// WaitOpen waits until something accepts connections at addr, for up to timeout.
func WaitOpen(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not open within %s: %w", addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// low and high bound the ports drawn: below Linux's default ephemeral range
// (32768-60999) and above the ports services commonly use.
const low, high = 20000, 32000

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// OrFree returns port after checking that it can be bound on ip, or, for 0, a free port
// this process has not handed out before.
func OrFree(ip string, port int) (int, error) {
	if port != 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return 0, err
		}
		return port, ln.Close()
	}
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 200 {
		candidate := low + rand.IntN(high-low)
		if handedOut.ports[candidate] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(candidate)))
		if err != nil {
			continue
		}
		_ = ln.Close()
		handedOut.ports[candidate] = true
		return candidate, nil
	}
	return 0, errors.New("no free port below the ephemeral range")
}

// Wanted is an address a server will bind, and the flag that chooses it.
type Wanted struct{ Flag, Addr string }

// Busy checks every address before anything binds one, and names each that is taken with
// the flag that moves it, in one error; nil when all are free. A port of 0 (pick one) is
// never busy.
func Busy(wanted ...Wanted) error {
	var taken []string
	for _, w := range wanted {
		if _, port, err := net.SplitHostPort(w.Addr); err != nil || port == "0" {
			continue
		}
		ln, err := net.Listen("tcp", w.Addr)
		if err != nil {
			taken = append(taken, w.Addr+" ("+w.Flag+")")
			continue
		}
		_ = ln.Close()
	}
	if len(taken) == 0 {
		return nil
	}
	return fmt.Errorf("in use: %s; another bundle may be running. Pass free ports to those flags, or 0 to pick free ones", strings.Join(taken, ", "))
}
