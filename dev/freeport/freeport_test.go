package freeport

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestFreePortsAreBindableBelowTheEphemeralRangeAndNeverRepeated(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p, err := OrFree("127.0.0.1", 0)
		if err != nil {
			t.Fatal(err)
		}
		if p < low || p >= high || seen[p] {
			t.Fatalf("port %d: outside [%d, %d) or handed out twice", p, low, high)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d cannot be bound: %v", p, err)
		}
		_ = ln.Close()
	}
}

func TestAGivenPortIsCheckedNotReplaced(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	if _, err := OrFree("127.0.0.1", busy); err == nil {
		t.Fatalf("port %d is in use, yet OrFree accepted it", busy)
	}
}

// Every busy address is named at once, with its flag; free ones and port 0 are not.
func TestBusyNamesEveryTakenAddressWithItsFlag(t *testing.T) {
	a, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	free, err := OrFree("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	err = Busy(Wanted{"--http-addr", a.Addr().String()}, Wanted{"--temporal-port", "127.0.0.1:" + strconv.Itoa(free)},
		Wanted{"--ui-port", b.Addr().String()}, Wanted{"--other", "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), a.Addr().String()+" (--http-addr)") || !strings.Contains(err.Error(), b.Addr().String()+" (--ui-port)") ||
		strings.Contains(err.Error(), "--temporal-port") || strings.Contains(err.Error(), "--other") {
		t.Fatalf("Busy: %v", err)
	}
	if err := Busy(Wanted{"--temporal-port", "127.0.0.1:" + strconv.Itoa(free)}); err != nil {
		t.Fatalf("a free port: %v", err)
	}
}
