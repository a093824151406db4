package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is one supervised child: started again when it exits unless it was stopped,
// the way an orchestrator restarts a crashed replica.
type process struct {
	name string
	path string
	args []string
	env  []string
	out  io.Writer
	log  *slog.Logger

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	held     bool // stopped on purpose: not restarted until Resume
	closing  bool
	restarts int
	crashes  int  // exits nobody asked for (those after a signal of ours are not crashes)
	asked    bool // a signal of ours is why the current run ends
	started  time.Time
	backoff  time.Duration
}

func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked()
}

func (p *process) startLocked() error {
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	// Its own process group: a Ctrl-C in the terminal reaches the launcher only, which
	// then stops the children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.asked, p.started = cmd, exited, false, time.Now()
	go p.watch(cmd, exited)
	return nil
}

// watch waits for the child and restarts it after a short pause unless it was stopped.
func (p *process) watch(cmd *exec.Cmd, exited chan struct{}) {
	err := cmd.Wait()
	close(exited)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing || p.held || p.cmd != cmd {
		return
	}
	// A process that keeps failing at start is retried less and less often (up to every
	// 10 s); one that ran for a while, or was killed on purpose, comes back at once.
	switch {
	case p.asked || time.Since(p.started) > 10*time.Second:
		p.backoff = 500 * time.Millisecond
	default:
		p.backoff = min(max(2*p.backoff, 500*time.Millisecond), 10*time.Second)
	}
	if !p.asked {
		p.crashes++
		p.log.Warn("process exited; starting it again", "child", p.name, "error", errString(err), "in", p.backoff.String())
	}
	time.AfterFunc(p.backoff, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closing || p.held || p.cmd != cmd {
			return
		}
		p.restarts++
		if err := p.startLocked(); err != nil {
			p.log.Error("restart failed", "child", p.name, "error", err.Error())
		}
	})
}

// signal sends sig to the running child and waits for it to exit.
func (p *process) signal(sig syscall.Signal, hold bool, wait time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.held, p.asked = hold, true
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not exit within %s of %s; killed", p.name, wait, sig)
	}
}

// resume starts a held process again.
func (p *process) resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		return nil
	}
	p.held = false
	p.restarts++
	return p.startLocked()
}

// stop ends the process for good: SIGTERM, then SIGKILL after wait.
func (p *process) stop(wait time.Duration) error {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	return p.signal(syscall.SIGTERM, true, wait)
}

func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func errString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// runOnce runs a one-shot command (migrate, temporal setup) to its end.
func runOnce(ctx context.Context, out io.Writer, env []string, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %w", path, args, err)
	}
	return nil
}
