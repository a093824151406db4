package store

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/opentreasury/treasury/internal/orders"
)

// OrderStart is a submitted order whose workflow is still to be started: written in the
// transaction that accepts the submission, deleted once the workflow runs its first step
// (MarkSubmitted). One that is still there when it is due, because its submit could not
// start the workflow (Temporal slow or down, the process gone), a worker starts
// (ClaimDueOrderStarts), so that an accepted submission is never lost.
type OrderStart struct {
	OrderID string `gorm:"primaryKey"`
	// SubmissionID ("" for none) and CorrelationID are the submission's, carried into the
	// workflow as its submit would have.
	SubmissionID  string
	CorrelationID string
	DueAt         time.Time
	// Attempts counts the worker's starts of it; LastError is why the last one failed.
	Attempts  int
	LastError string
}

func (OrderStart) TableName() string { return "order_starts" }

// MarkSubmitted moves a draft into the pipeline and emits Order.Submitted
// (orders.StepSubmitted), fixing on the order the version of its app's policy in force now,
// the one that will evaluate it whatever is published while it waits. Applied again, it
// changes nothing. The order's workflow takes this step first, after the submit that
// accepted the order took it: the workflow runs, so its queued start is forgotten too.
func (s *Store) MarkSubmitted(ctx context.Context, orderID, correlationID string, at time.Time) (*StepResult, error) {
	var res *StepResult
	err := s.Tx(ctx, func(tx *Store) error {
		var err error
		if res, err = tx.markSubmitted(ctx, orderID, correlationID, "", at); err != nil {
			return err
		}
		return tx.OrderStarted(ctx, orderID)
	})
	return res, err
}

func (s *Store) markSubmitted(ctx context.Context, orderID, correlationID, submissionID string, at time.Time) (*StepResult, error) {
	step := orders.StepSubmitted
	ev := &EventSpec{Name: step.Event}
	return s.applyStep(ctx, OrderChange{OrderID: orderID, Step: step.Key(0), From: step.From, To: step.To, Reason: "submitted",
		CorrelationID: correlationID, At: at, Event: ev,
		Also: func(tx *Store, o *Order, _ []OrderLeg) error {
			version := 0 // an app without a policy
			p, err := tx.Policy(ctx, o.OrgID, o.App)
			switch {
			case err == nil:
				version = p.Version
			case !errors.Is(err, ErrNotFound):
				return err
			}
			submitted := at.UTC()
			o.SubmittedAt, o.PolicyVersion, ev.Body.PolicyVersion = &submitted, &version, &version
			o.SubmissionID = submissionID
			return nil
		}}, nil)
}

// SubmitOrder accepts a submission of a draft in one transaction: the order marked
// submitted (MarkSubmitted), its workflow's start queued (start, due at start.DueAt) and
// the audit record. An order submitted before is left as it is, nothing queued: the
// result's Applied is false.
func (s *Store) SubmitOrder(ctx context.Context, start *OrderStart, at time.Time, audit *AuditLog) (*StepResult, error) {
	var res *StepResult
	err := s.Tx(ctx, func(tx *Store) error {
		var err error
		if res, err = tx.markSubmitted(ctx, start.OrderID, start.CorrelationID, start.SubmissionID, at); err != nil || !res.Applied {
			return err
		}
		start.DueAt = start.DueAt.UTC()
		if err := tx.with(ctx).Create(start).Error; err != nil {
			return err
		}
		if audit != nil {
			return tx.AppendAudit(ctx, audit)
		}
		return nil
	})
	return res, err
}

// QueuedOrderStart is the order's queued start, nil when none is queued.
func (s *Store) QueuedOrderStart(ctx context.Context, orderID string) (*OrderStart, error) {
	var st OrderStart
	err := s.with(ctx).Where("order_id = ?", orderID).Take(&st).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	return &st, err
}

// OrderStarted forgets the queued start of an order whose workflow Temporal has.
func (s *Store) OrderStarted(ctx context.Context, orderID string) error {
	return s.with(ctx).Where("order_id = ?", orderID).Delete(&OrderStart{}).Error
}

// ClaimDueOrderStarts takes up to limit queued starts that are due at now, each for lease:
// its due time moves past the lease, conditionally, so that another worker asking at the
// same moment does not take it too (and, should this worker die, it is due again when the
// lease ends).
func (s *Store) ClaimDueOrderStarts(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]OrderStart, error) {
	now = now.UTC()
	var due []OrderStart
	if err := s.with(ctx).Where("due_at <= ?", now).Order("due_at, order_id").Limit(limit).Find(&due).Error; err != nil {
		return nil, err
	}
	claimed := due[:0]
	for _, st := range due {
		res := s.with(ctx).Model(&OrderStart{}).Where("order_id = ? AND due_at = ?", st.OrderID, st.DueAt).
			Updates(map[string]any{"due_at": now.Add(lease), "attempts": gorm.Expr("attempts + 1")})
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected == 1 {
			st.Attempts++
			claimed = append(claimed, st)
		}
	}
	return claimed, nil
}

// OrderStartDue makes a queued start due at at: its submit could not start the workflow,
// and a worker need not wait for its grace to end.
func (s *Store) OrderStartDue(ctx context.Context, orderID string, at time.Time) error {
	return s.with(ctx).Model(&OrderStart{}).Where("order_id = ?", orderID).Update("due_at", at.UTC()).Error
}

// OrderStartFailed records why a claimed start failed; it is due again when its lease ends.
func (s *Store) OrderStartFailed(ctx context.Context, orderID, why string) error {
	return s.with(ctx).Model(&OrderStart{}).Where("order_id = ?", orderID).Update("last_error", why).Error
}
