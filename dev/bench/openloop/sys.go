package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTimes are CPU times used so far: by treasury-dev, by this program, and by every core
// of the machine on anything but idling (which also counts PostgreSQL, the kernel's
// loopback work that no process is charged for, and whatever else shares the machine).
type cpuTimes struct{ server, own, machine time.Duration }

const ticksPerSecond = 100 // USER_HZ on Linux

func readCPU(pid int) cpuTimes {
	var c cpuTimes
	if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The command name (field 2) may hold spaces; the fields after its ")" do not.
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		if len(f) >= 13 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			c.server = time.Duration(u+s) * time.Second / ticksPerSecond
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.own = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if raw, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(raw), "\n")
		f := strings.Fields(line)
		if len(f) >= 8 && f[0] == "cpu" {
			// user, nice, system, irq, softirq; not iowait, nor steal (another guest's).
			var busy int64
			for _, i := range []int{1, 2, 3, 6, 7} {
				n, _ := strconv.ParseInt(f[i], 10, 64)
				busy += n
			}
			c.machine = time.Duration(busy) * time.Second / ticksPerSecond
		}
	}
	return c
}

// machineName is the CPU model, for the chart's title: figures are read per machine.
func machineName() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(raw)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "unknown CPU"
}
