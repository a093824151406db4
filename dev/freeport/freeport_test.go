package freeport

import (
	"net"
	"strconv"
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
