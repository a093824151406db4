// Command burst submits a burst of payments at once to a fresh dev bundle and counts the
// answers that were not 2xx: a submit waits for the policy's decision only a bounded time
// (SUBMIT_DECISION_WAIT) once its workflow is durably started, so a burst queued behind
// busy workers is accepted (202, policyDecision pending), never timed out (503). It prints
// the count of non-2xx answers (target 0), how many were pending, and the answers' p50 and
// p99 beside a lone submit's on the same bundle; then it follows every order to its end.
//
//	go run ./dev/bench/burst -dev-bin bin/treasury-dev -orders 1000
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opentreasury/treasury/dev/bench/devbundle"
)

// answer is one submit's answer.
type answer struct {
	status  int
	pending bool
	took    time.Duration
	// detail is a refusal's problem detail, or the transport's error.
	detail string
}

// submit sends one submit and times its answer.
func submit(c *devbundle.Client, id string) answer {
	start := time.Now()
	status, body, err := c.Do("POST", "/payments/"+id+"/submit", c.Creds.Keys["pay"].SK, "{}")
	a := answer{status: status, pending: body["policyDecision"] == "pending", took: time.Since(start)}
	if detail, _ := body["detail"].(string); detail != "" {
		a.detail = detail
	}
	if err != nil {
		a.status, a.detail = 0, err.Error() // no answer at all: counted as not 2xx
	}
	return a
}

func main() {
	devBin := flag.String("dev-bin", "bin/treasury-dev", "treasury-dev binary to start (ignored with -credentials)")
	credsPath := flag.String("credentials", "", "credentials.json of a running bundle (started with a lifted rate limit), instead of starting one")
	n := flag.Int("orders", 1000, "payments submitted at once")
	lone := flag.Int("lone", 20, "payments submitted one at a time first, on the same bundle: the reference")
	extra := flag.String("dev-args", "--rate-limit 100000 --rate-burst 100000",
		"flags for treasury-dev, space separated (the default lifts the per-key rate limit: one key sends the whole burst)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up following the orders after")
	flag.Parse()
	if err := run(*devBin, *credsPath, strings.Fields(*extra), *n, *lone, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "burst:", err)
		os.Exit(1)
	}
}

func run(devBin, credsPath string, extra []string, n, lone int, timeout time.Duration) error {
	if credsPath == "" {
		b, err := devbundle.Start(devBin, extra)
		if err != nil {
			return fmt.Errorf("start treasury-dev: %w", err)
		}
		defer b.Stop()
		credsPath = b.CredentialsPath
	}
	creds, err := devbundle.ReadCredentials(credsPath)
	if err != nil {
		return err
	}
	c := devbundle.NewClient(creds)

	// The reference: lone submits on the idle bundle, each answered with its decision.
	ids, err := c.CreatePayments(lone + 1)
	if err != nil {
		return err
	}
	var alone []time.Duration
	for i, id := range ids {
		a := submit(c, id)
		if a.status != 202 {
			return fmt.Errorf("a lone submit answered %d", a.status)
		}
		if i > 0 { // the first warms the bundle up
			alone = append(alone, a.took)
		}
	}
	slices.Sort(alone)
	if _, _, err := c.Confirmations("pay", submittedNow(ids), timeout); err != nil {
		return err
	}

	if ids, err = c.CreatePayments(n); err != nil {
		return err
	}
	answers := make([]answer, len(ids))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, id := range ids {
		wg.Go(func() {
			<-start
			answers[i] = submit(c, id)
		})
	}
	sent := time.Now()
	close(start)
	wg.Wait()
	burstSpan := time.Since(sent)

	failed, pending, firstRefusal := map[int]int{}, 0, ""
	took := make([]time.Duration, 0, len(answers))
	for _, a := range answers {
		if a.status < 200 || a.status > 299 {
			failed[a.status]++
			if firstRefusal == "" {
				firstRefusal = fmt.Sprintf("%d after %v: %s", a.status, a.took.Round(time.Millisecond), a.detail)
			}
		}
		if a.pending {
			pending++
		}
		took = append(took, a.took)
	}
	slices.Sort(took)
	notOK := 0
	var byStatus []string
	for status, k := range failed {
		notOK += k
		byStatus = append(byStatus, fmt.Sprintf("%d×%d", k, status))
	}
	slices.Sort(byStatus)
	p50, p99, lone50 := devbundle.Percentile(took, .5), devbundle.Percentile(took, .99), devbundle.Percentile(alone, .5)
	fmt.Printf("burst: %d submits at once, answered within %v: %d not 2xx %v, %d accepted with policyDecision pending\n",
		len(answers), burstSpan.Round(time.Millisecond), notOK, byStatus, pending)
	if firstRefusal != "" {
		fmt.Printf("burst: a refusal: %s\n", firstRefusal)
	}
	fmt.Printf("burst: answer p50 %v  p99 %v  max %v; a lone submit's answer p50 %v (ratio p50/lone %.1f)\n",
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond),
		lone50.Round(time.Millisecond), float64(p50)/float64(lone50))
	devbundle.Summarize(fmt.Sprintf("%d submits at once: answers not 2xx", len(answers)), fmt.Sprintf("%d (%d pending)", notOK, pending), "",
		fmt.Sprintf("answer p50 %v, p99 %v; lone p50 %v", p50.Round(time.Millisecond), p99.Round(time.Millisecond), lone50.Round(time.Millisecond)),
		"0", devbundle.Verdict(notOK == 0))

	// Every accepted order goes on to its end: a pending decision is decided after.
	var accepted []devbundle.Submitted
	for i, a := range answers {
		if a.status == 202 {
			accepted = append(accepted, devbundle.Submitted{ID: ids[i], SentAt: sent})
		}
	}
	confirmed, other, err := c.Confirmations("pay", accepted, timeout)
	fmt.Printf("burst: of %d accepted, %d confirmed and %d ended otherwise, %v after the burst\n", len(accepted), len(confirmed), other,
		time.Since(sent).Round(time.Second))
	if err != nil {
		return err
	}
	if notOK > 0 {
		return fmt.Errorf("%d submits were not accepted", notOK)
	}
	return nil
}

// submittedNow are orders just submitted, for following them to their end.
func submittedNow(ids []string) []devbundle.Submitted {
	out := make([]devbundle.Submitted, len(ids))
	for i, id := range ids {
		out[i] = devbundle.Submitted{ID: id, SentAt: time.Now()}
	}
	return out
}
