package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Component is one part of a process: started after the components before it (it may use
// what they made) and stopped before them. Start and Stop may be nil.
type Component struct {
	Name  string
	Start func(ctx context.Context) error
	Stop  func(ctx context.Context) error
}

// Group runs a process's components: it starts them in the order they are listed and
// stops them in the reverse order, each stop with a budget of its own. A process states
// its shutdown order by the order of its list: the HTTP server comes after the live
// channel's hub, so connections close (1001) before requests drain, and the worker comes
// after the store, so it stops polling before the store closes.
type Group struct {
	// StopTimeout bounds each component's Stop (10 s when zero).
	StopTimeout time.Duration
	Log         *slog.Logger

	mu      sync.Mutex
	started []Component
	failed  chan error
}

// Start starts the components in order. If one fails, those already started are stopped
// again (in reverse) and its error is returned.
func (g *Group) Start(ctx context.Context, parts ...Component) error {
	g.failures()
	for _, c := range parts {
		if c.Start != nil {
			if err := c.Start(ctx); err != nil {
				stopErr := g.Stop()
				return errors.Join(fmt.Errorf("start %s: %w", c.Name, err), stopErr)
			}
		}
		g.mu.Lock()
		g.started = append(g.started, c)
		g.mu.Unlock()
	}
	return nil
}

// Fail reports that a running component cannot go on (its server stopped serving, the
// worker hit a fatal error): Wait returns the first such error.
func (g *Group) Fail(err error) {
	select {
	case g.failures() <- err:
	default:
	}
}

// failures is where Fail reports; it holds the first failure until Wait takes it.
func (g *Group) failures() chan error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed == nil {
		g.failed = make(chan error, 1)
	}
	return g.failed
}

// Wait blocks until ctx ends (nil) or a component fails (its error).
func (g *Group) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-g.failures():
		return err
	}
}

// Run starts the components, waits for ctx to end or a component to fail, and stops
// them: the process's whole life.
func (g *Group) Run(ctx context.Context, parts ...Component) error {
	if err := g.Start(ctx, parts...); err != nil {
		return err
	}
	runErr := g.Wait(ctx)
	return errors.Join(runErr, g.Stop())
}

// Stop stops the started components in reverse order, once each, and joins their errors.
func (g *Group) Stop() error {
	timeout := g.StopTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	var errs []error
	for {
		g.mu.Lock()
		n := len(g.started)
		if n == 0 {
			g.mu.Unlock()
			return errors.Join(errs...)
		}
		c := g.started[n-1]
		g.started = g.started[:n-1]
		g.mu.Unlock()
		if c.Stop == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := c.Stop(ctx)
		cancel()
		if err != nil {
			if g.Log != nil {
				g.Log.Warn("component did not stop cleanly", "component", c.Name, "error", err.Error())
			}
			errs = append(errs, fmt.Errorf("stop %s: %w", c.Name, err))
		}
	}
}
