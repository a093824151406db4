package store

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// PayoutSchedule is a payment body that its Temporal Schedule (of the same id) turns into
// one order per run.
type PayoutSchedule struct {
	ID    string
	OrgID string
	App   string
	// WalletID is the payment's wallet.
	WalletID string
	// Payment is the body of the payment each run creates, as the schedule was given it.
	Payment string
	// Every (an ISO 8601 duration) or Cron (five fields) says when it runs; Timezone is
	// the cron's zone.
	Every    string
	Cron     string
	Timezone string
	StartAt  *time.Time
	EndAt    *time.Time
	Paused   bool
	// ActorKind is the kind of credential that created the schedule (auth.Kind*): its runs
	// act as that credential did.
	ActorKind string
	Creator   `gorm:"embedded"`
	CreatedAt time.Time
	UpdatedAt time.Time
	DeletedAt *time.Time
}

func (PayoutSchedule) TableName() string { return "payout_schedules" }

// PayoutRun is one run of a schedule: the order it makes, whose id is fixed when the run
// is first claimed, or why it made none.
type PayoutRun struct {
	ScheduleID string
	// NominalTime is when the run was due (RFC 3339, UTC), whenever it ran.
	NominalTime string
	OrderID     string
	Error       string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func (PayoutRun) TableName() string { return "payout_runs" }

// CreatePayoutSchedule stores a new schedule.
func (s *Store) CreatePayoutSchedule(ctx context.Context, p *PayoutSchedule) error {
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return s.with(ctx).Create(p).Error
}

// PayoutScheduleOf returns a schedule that is not deleted; orgID "" finds it in any
// organisation (the worker).
func (s *Store) PayoutScheduleOf(ctx context.Context, orgID, id string) (*PayoutSchedule, error) {
	return s.payoutSchedule(ctx, s.with(ctx).Where("id = ? AND deleted_at IS NULL", id), orgID)
}

// PayoutScheduleEver returns a schedule of an organisation, deleted or not.
func (s *Store) PayoutScheduleEver(ctx context.Context, orgID, id string) (*PayoutSchedule, error) {
	return s.payoutSchedule(ctx, s.with(ctx).Where("id = ?", id), orgID)
}

func (s *Store) payoutSchedule(ctx context.Context, q *gorm.DB, orgID string) (*PayoutSchedule, error) {
	if orgID != "" {
		q = q.Where("org_id = ?", orgID)
	}
	var p PayoutSchedule
	if err := q.Take(&p).Error; err != nil {
		return nil, notFound(err)
	}
	return &p, nil
}

// PayoutSchedules pages through an app's schedules that are not deleted, newest first:
// at most limit after the one whose id is afterID.
func (s *Store) PayoutSchedules(ctx context.Context, orgID, app, afterID string, limit int) ([]PayoutSchedule, error) {
	q := s.with(ctx).Where("org_id = ? AND app = ? AND deleted_at IS NULL", orgID, app)
	if afterID != "" {
		q = q.Where("id < ?", afterID)
	}
	var list []PayoutSchedule
	return list, q.Order("id DESC").Limit(limit).Find(&list).Error
}

// SetPayoutSchedulePaused pauses or resumes a schedule that is not deleted.
func (s *Store) SetPayoutSchedulePaused(ctx context.Context, orgID, id string, paused bool, at time.Time) error {
	res := s.with(ctx).Model(&PayoutSchedule{}).Where("id = ? AND org_id = ? AND deleted_at IS NULL", id, orgID).
		Updates(map[string]any{"paused": paused, "updated_at": at.UTC()})
	if res.Error == nil && res.RowsAffected == 0 {
		return ErrNotFound
	}
	return res.Error
}

// DeletePayoutSchedule marks a schedule deleted: it runs no more and is no longer listed.
func (s *Store) DeletePayoutSchedule(ctx context.Context, orgID, id string, at time.Time) error {
	res := s.with(ctx).Model(&PayoutSchedule{}).Where("id = ? AND org_id = ? AND deleted_at IS NULL", id, orgID).
		Updates(map[string]any{"deleted_at": at.UTC(), "updated_at": at.UTC()})
	if res.Error == nil && res.RowsAffected == 0 {
		return ErrNotFound
	}
	return res.Error
}

// ClaimPayoutRun returns the run of a schedule due at a nominal time, recording it first,
// with orderID as the id of the order it makes, when no run of that time was recorded:
// every repeat of the run (a retried activity, a run started twice) gets the first one's
// order id, so that one order at most is ever made for it.
func (s *Store) ClaimPayoutRun(ctx context.Context, run *PayoutRun) (*PayoutRun, error) {
	run.CreatedAt, run.UpdatedAt = run.CreatedAt.UTC(), run.UpdatedAt.UTC()
	if err := s.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(run).Error; err != nil {
		return nil, err
	}
	var kept PayoutRun
	err := s.with(ctx).Where("schedule_id = ? AND nominal_time = ?", run.ScheduleID, run.NominalTime).Take(&kept).Error
	return &kept, err
}

// PayoutRunOf returns the run of a schedule at a nominal time, nil when none was recorded.
func (s *Store) PayoutRunOf(ctx context.Context, scheduleID, nominalTime string) (*PayoutRun, error) {
	var runs []PayoutRun
	err := s.with(ctx).Where("schedule_id = ? AND nominal_time = ?", scheduleID, nominalTime).Limit(1).Find(&runs).Error
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return &runs[0], nil
}

// FailPayoutRun records why a run made no order.
func (s *Store) FailPayoutRun(ctx context.Context, scheduleID, nominalTime, reason string, at time.Time) error {
	return s.with(ctx).Model(&PayoutRun{}).Where("schedule_id = ? AND nominal_time = ?", scheduleID, nominalTime).
		Updates(map[string]any{"error": reason, "updated_at": at.UTC()}).Error
}

// PayoutRunView is a run with the status of the order it made ("" when it made none).
type PayoutRunView struct {
	PayoutRun
	OrderStatus string
}

// PayoutRuns pages through a schedule's runs, the latest due first: at most limit before
// the nominal time before ("" for the first page).
func (s *Store) PayoutRuns(ctx context.Context, scheduleID, before string, limit int) ([]PayoutRunView, error) {
	q := s.with(ctx).Table("payout_runs AS r").
		Select("r.schedule_id, r.nominal_time, r.order_id, r.error, r.created_at, r.updated_at, COALESCE(o.status, '') AS order_status").
		Joins("LEFT JOIN orders AS o ON o.id = r.order_id").
		Where("r.schedule_id = ?", scheduleID)
	if before != "" {
		q = q.Where("r.nominal_time < ?", before)
	}
	var rows []PayoutRunView
	return rows, q.Order("r.nominal_time DESC").Limit(limit).Scan(&rows).Error
}
