package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/opentreasury/treasury/internal/events"
)

// TailOptions configure Tail.
type TailOptions struct {
	URL, ConfigID, Token string
	// Count ends the tail after this many events (0: never).
	Count int
	// Until ends the tail after an event of this name, matched without regard to case.
	Until string
	// JSON prints each event frame as the server sent it, one per line, instead of a
	// readable line.
	JSON bool
	// Timeout ends the tail with an error when nothing else has ended it by then (0: never).
	Timeout time.Duration
	// Out receives the events, Log the connection notices (connected, reconnecting).
	Out, Log io.Writer
	Options  *Options
}

// Tail prints a config's events as they arrive, one line each, reconnecting when the
// server asks it to (see Follow). It returns nil once Count or Until is reached or ctx
// is done, and an error for a refusal, a final close code or the timeout.
func Tail(ctx context.Context, t TailOptions) error {
	if t.ConfigID == "" {
		return errors.New("a config id (wsc_…) is required")
	}
	if t.Token == "" {
		return errors.New("a token is required")
	}
	if t.Count < 0 {
		return errors.New("the count must not be negative")
	}
	until := ""
	if t.Until != "" {
		name, ok := events.Canonical(t.Until)
		if !ok {
			// A misspelt name would never match, and the tail would never end.
			return fmt.Errorf("%q is not an event name (%s)", t.Until, strings.Join(events.Names, ", "))
		}
		until = name
	}
	out, log := t.Out, t.Log
	if out == nil {
		out = io.Discard
	}
	if log == nil {
		log = io.Discard
	}
	tctx := ctx
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		tctx, cancel = context.WithTimeout(ctx, t.Timeout)
		defer cancel()
	}

	seen := 0
	handle := func(f Frame) error {
		switch f.Type {
		case FrameReady:
			fmt.Fprintf(log, "connected to %s: scope %s, events %s\n", printable(f.ConfigID), printable(f.Scope),
				printable(strings.Join(f.Events, ",")))
			// websocket.test reaches every connection whatever the config subscribes to.
			if until != "" && until != events.WebSocketTest && !events.Matches(f.Events, until) {
				fmt.Fprintf(log, "warning: this config does not subscribe to %s; only a signal or the timeout will end the tail\n", until)
			}
		case FrameEvent:
			if err := printEvent(out, f, t.JSON); err != nil {
				return err
			}
			seen++
			if (t.Count > 0 && seen >= t.Count) || (until != "" && strings.EqualFold(f.Event, until)) {
				return ErrStop
			}
		}
		return nil
	}
	opts := t.Options.withDefaults()
	if opts.OnRetry == nil {
		opts.OnRetry = func(err error, wait time.Duration) {
			fmt.Fprintf(log, "%v; reconnecting in %s\n", err, wait)
		}
	}
	err := Follow(tctx, t.URL, t.ConfigID, t.Token, handle, &opts)
	if err == nil && ctx.Err() == nil && tctx.Err() != nil {
		return fmt.Errorf("timed out after %s (%d events received)", t.Timeout, seen)
	}
	return err
}

func printEvent(w io.Writer, f Frame, raw bool) error {
	if !raw {
		_, err := fmt.Fprintln(w, FormatEvent(f))
		return err
	}
	// The server sends compact JSON already; compacting again guarantees one line.
	var b bytes.Buffer
	if err := json.Compact(&b, f.Raw); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// FormatEvent renders an event frame as one readable line: the time, the event, then
// the order it concerns (id, status and leg) or, for an event about no order, its data.
func FormatEvent(f Frame) string {
	var d struct {
		OrderID     string `json:"orderId"`
		OrderStatus string `json:"orderStatus"`
		Leg         string `json:"leg"`
	}
	_ = json.Unmarshal(f.Data, &d)
	at := f.At
	if at == "" {
		at = "-"
	}
	s := fmt.Sprintf("%-24s  %-24s", at, f.Event)
	if d.OrderID != "" {
		s += "  " + d.OrderID + "  " + d.OrderStatus
		if d.Leg != "" {
			s += "  leg=" + d.Leg
		}
	} else {
		var b bytes.Buffer
		if json.Compact(&b, f.Data) == nil {
			s += "  " + b.String()
		}
	}
	return printable(strings.TrimRight(s, " "))
}

// printable keeps a line from the server from driving the terminal: control
// characters are shown as '?'. (JSON escapes them in data; names and ids are not JSON.)
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
