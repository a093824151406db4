package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/opentreasury/treasury/workflows"
)

// submitParts splits one submit call along its order workflow's history, read back from
// the Temporal server after the step: the server's event times and the service's own
// Order.Submitted are on this machine's clock, as are the call's ends.
type submitParts struct {
	id    string
	total time.Duration
	// api: the call sent -> the workflow started (authentication, the order read, the
	// Update-with-Start call and the server persisting the start).
	api time.Duration
	// queued: started -> its first workflow task taken by the worker.
	queued time.Duration
	// toSubmitted: taken -> Order.Submitted committed (the MarkSubmitted step).
	toSubmitted time.Duration
	// toAnswered: Order.Submitted -> the server persisting the update's completion (the
	// policy, the next step and the task's completion).
	toAnswered time.Duration
	// back: the update's completion -> the answer received (the server handing it to the
	// waiting call, the API's response).
	back time.Duration
	// tasks, markers and upserts in the history up to the update's completion.
	tasks, markers, upserts int
}

// explainer reads order workflows' histories from the bundle's Temporal server.
type explainer struct {
	c client.Client
}

func newExplainer(addr, namespace string) (*explainer, error) {
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return nil, fmt.Errorf("temporal %s: %w", addr, err)
	}
	return &explainer{c: c}, nil
}

func (e *explainer) close() { e.c.Close() }

// parts reads o's workflow history; ok is false when the history does not hold the
// submission's update completed (the order was not followed far enough).
func (e *explainer) parts(ctx context.Context, id string, sent, submittedAt time.Time, lat time.Duration) (p submitParts, ok bool, err error) {
	p = submitParts{id: id, total: lat}
	var started, taken, answered time.Time
	it := e.c.GetWorkflowHistory(ctx, workflows.OrderWorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && answered.IsZero() {
		ev, err := it.Next()
		if err != nil {
			return p, false, err
		}
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			started = at
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			p.tasks++
			if taken.IsZero() {
				taken = at
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			p.markers++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			p.upserts++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
			answered = at
		}
	}
	if started.IsZero() || taken.IsZero() || answered.IsZero() || submittedAt.IsZero() {
		return p, false, nil
	}
	p.api = started.Sub(sent)
	p.queued = taken.Sub(started)
	p.toSubmitted = submittedAt.Sub(taken)
	p.toAnswered = answered.Sub(submittedAt)
	p.back = sent.Add(lat).Sub(answered)
	return p, true, nil
}

// explainSubmits reads the history of every order of the step whose submit was answered
// and prints where its time went: the median and the 99th percentile of each part, and the
// three slowest calls part by part.
func explainSubmits(ctx context.Context, e *explainer, t *tracker, orders []*order) {
	type call struct {
		id          string
		sent, subAt time.Time
		lat         time.Duration
	}
	var calls []call
	t.mu.Lock()
	for _, o := range orders {
		if o.submitted {
			calls = append(calls, call{o.id, o.submitSent, o.submittedAt, o.submitLat})
		}
	}
	t.mu.Unlock()
	var all []submitParts
	for _, c := range calls {
		p, ok, err := e.parts(ctx, c.id, c.sent, c.subAt, c.lat)
		if err != nil {
			fmt.Printf("  submit parts: %s: %v\n", c.id, err)
			return
		}
		if ok {
			all = append(all, p)
		}
	}
	if len(all) == 0 {
		return
	}
	col := func(f func(submitParts) time.Duration) (string, string) {
		s := make([]time.Duration, len(all))
		for i, p := range all {
			s[i] = f(p)
		}
		slices.Sort(s)
		return ms(pct(s, .5)), ms(pct(s, .99))
	}
	fmt.Printf("  submit, part by part along its workflow's history (%d calls; p50 / p99 of each part on its own):\n", len(all))
	for _, part := range []struct {
		name string
		f    func(submitParts) time.Duration
	}{
		{"call sent -> workflow started (API, Update-with-Start, the start persisted)", func(p submitParts) time.Duration { return p.api }},
		{"-> first workflow task taken by the worker", func(p submitParts) time.Duration { return p.queued }},
		{"-> Order.Submitted committed (MarkSubmitted)", func(p submitParts) time.Duration { return p.toSubmitted }},
		{"-> the update's completion persisted (policy, the next step, the task completed)", func(p submitParts) time.Duration { return p.toAnswered }},
		{"-> the answer received (the server to the API, the response)", func(p submitParts) time.Duration { return p.back }},
		{"the whole call", func(p submitParts) time.Duration { return p.total }},
	} {
		p50, p99 := col(part.f)
		fmt.Printf("    %-84s %8s / %8s\n", part.name, p50, p99)
	}
	slices.SortFunc(all, func(a, b submitParts) int { return cmp.Compare(b.total, a.total) })
	for _, p := range all[:min(3, len(all))] {
		fmt.Printf("    slow: %s %s = %s + %s + %s + %s + %s (%d workflow tasks, %d markers, %d upserts before the answer)\n",
			p.id, ms(p.total), ms(p.api), ms(p.queued), ms(p.toSubmitted), ms(p.toAnswered), ms(p.back), p.tasks, p.markers, p.upserts)
	}
}
