package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// PayoutScheduler keeps the Temporal Schedules of payout schedules
// (workflows.PayoutSchedules).
type PayoutScheduler interface {
	Create(ctx context.Context, s workflows.PayoutScheduleSpec) error
	SetPaused(ctx context.Context, id string, paused bool) error
	Delete(ctx context.Context, id string) error
	NextRuns(ctx context.Context, id string) ([]time.Time, error)
}

// DefaultPayoutMinInterval is the shortest interval of a payout schedule's every when
// Service.PayoutMinInterval is not set.
const DefaultPayoutMinInterval = time.Minute

// scheduledKeyRetention is how long the Idempotency-Key record of a run's order is kept.
// The run's own row, which fixes its order's id, is what keeps a late repeat from making a
// second order; the record lets a request naming the key get the run's answer.
const scheduledKeyRetention = 24 * time.Hour

// payments is the domain every payout schedule makes orders of.
var payments, _ = DomainOfApp("pay")

// PayoutScheduleInput is a new payout schedule: the body of the payment (single or batch)
// each run creates, and when it runs: Every (an ISO 8601 duration) or Cron (five fields,
// in Timezone), from StartAt to EndAt when given.
type PayoutScheduleInput struct {
	Payment        json.RawMessage
	Every, Cron    string
	Timezone       string
	StartAt, EndAt *time.Time
}

// PayoutSchedule is a schedule as read: with its next run when Temporal plans one (when
// one schedule is read).
type PayoutSchedule struct {
	*store.PayoutSchedule
	NextRunAt *time.Time
}

// PayoutRunView is a run of a schedule with the status of its order.
type PayoutRunView = store.PayoutRunView

func (s *Service) payoutMinInterval() time.Duration {
	if s.PayoutMinInterval > 0 {
		return s.PayoutMinInterval
	}
	return DefaultPayoutMinInterval
}

// CreatePayoutSchedule stores a payout schedule and creates its Temporal Schedule (SPEC
// 3.9). The payment is checked as a create would check it, but for its price, which each
// run reads when it creates its order. The schedule's runs act as the credential that
// created it: its orders name it as their creator, so maker-checker keeps it (and the
// person behind it) from approving them.
func (s *Service) CreatePayoutSchedule(ctx context.Context, who Caller, in PayoutScheduleInput) (*PayoutSchedule, error) {
	if err := mayDo(who, payments.App, auth.ActionWrite); err != nil {
		return nil, err
	}
	if s.Payouts == nil {
		return nil, ErrWorkflowsUnavailable
	}
	every, errs := s.checkWhen(in)
	var payment bytes.Buffer
	var walletID string
	if len(bytes.TrimSpace(in.Payment)) == 0 || json.Compact(&payment, in.Payment) != nil || payment.Bytes()[0] != '{' {
		errs = append(errs, field("payment", "is required: the body of a payment, single or batch (POST /api/v1/payments)"))
	} else if draft, _, err := s.readDraft(ctx, who, payments.Name, payment.Bytes()); err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Kind != Invalid {
			return nil, err
		}
		for _, f := range e.Fields {
			errs = append(errs, field("payment."+f.Field, f.Message))
		}
	} else {
		walletID = draft.WalletID
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	now := s.now()
	p := &store.PayoutSchedule{ID: s.newID(ids.PayoutSchedule), OrgID: who.OrgID, App: payments.App, WalletID: walletID,
		Payment: payment.String(), Every: in.Every, Cron: in.Cron, Timezone: in.Timezone, StartAt: utcOrNil(in.StartAt),
		EndAt: utcOrNil(in.EndAt), ActorKind: who.Kind, Creator: store.Creator{CreatedBy: who.ID, CreatedByUser: who.Person},
		CreatedAt: now, UpdatedAt: now}
	// Temporal's schedule is made paused first, then the record, then it runs: a schedule
	// is never listed without its Temporal Schedule, and one whose record was never made
	// stays paused, firing nothing.
	spec := workflows.PayoutScheduleSpec{ID: p.ID, Every: every, Cron: p.Cron, Timezone: p.Timezone, Paused: true,
		Note: "Payout schedule of " + who.OrgID + ": one payment order per run."}
	if p.StartAt != nil {
		spec.StartAt = *p.StartAt
	}
	if p.EndAt != nil {
		spec.EndAt = *p.EndAt
	}
	if err := s.Payouts.Create(ctx, spec); err != nil {
		var bad *workflows.InvalidScheduleError
		if errors.As(err, &bad) {
			name := "every"
			if p.Cron != "" {
				name = "cron"
			}
			return nil, invalid(field(name, "Temporal refused it: "+bad.Message))
		}
		return nil, refuse(Unavailable, "Temporal did not take the schedule ("+err.Error()+"); nothing was created. Try again.")
	}
	err := s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.CreatePayoutSchedule(ctx, p) },
		"payout_schedule.created", "payout_schedule", p.ID, map[string]any{"every": p.Every, "cron": p.Cron, "timezone": p.Timezone})
	if err != nil {
		return nil, err
	}
	if err := s.Payouts.SetPaused(ctx, p.ID, false); err != nil {
		// Made, and paused: the record says so, and a resume starts it.
		if perr := s.Store.SetPayoutSchedulePaused(ctx, who.OrgID, p.ID, true, s.now()); perr != nil {
			s.Log.Warn("payout schedule not marked paused", "scheduleId", p.ID, "error", perr.Error())
		}
		p.Paused = true
		s.Log.Warn("payout schedule made paused: Temporal did not start it", "scheduleId", p.ID, "error", err.Error())
	}
	return &PayoutSchedule{PayoutSchedule: p}, nil
}

func utcOrNil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// cronField is what a cron field may hold: numbers, names, ranges, steps, lists, * and ?.
var cronField = regexp.MustCompile(`^[0-9A-Za-z*?/,\-]+$`)

// checkWhen checks when a schedule runs and reads its every.
func (s *Service) checkWhen(in PayoutScheduleInput) (time.Duration, []orders.FieldError) {
	var errs []orders.FieldError
	var every time.Duration
	switch {
	case in.Every != "" && in.Cron != "":
		errs = append(errs, field("every", "give every or cron, not both"))
	case in.Every == "" && in.Cron == "":
		errs = append(errs, field("every", "one of every (an ISO 8601 duration such as P1D) or cron (five fields) is required"))
	case in.Every != "":
		d, err := ParseISODuration(in.Every)
		switch {
		case err != nil:
			errs = append(errs, field("every", err.Error()))
		case d < s.payoutMinInterval():
			errs = append(errs, field("every", "must be at least "+FormatISODuration(s.payoutMinInterval())+", the shortest interval this service allows"))
		default:
			every = d
		}
	default:
		parts := strings.Fields(in.Cron)
		ok := len(parts) == 5
		for _, p := range parts {
			ok = ok && cronField.MatchString(p)
		}
		if !ok {
			errs = append(errs, field("cron", "must be five fields (minute hour day-of-month month day-of-week), such as 0 9 1 * *"))
		}
	}
	if in.Timezone != "" && in.Cron == "" {
		errs = append(errs, field("timezone", "is the time zone of a cron; an every counts from the Unix epoch, in no zone"))
	} else if in.Timezone != "" {
		if _, err := time.LoadLocation(in.Timezone); err != nil || in.Timezone == "Local" {
			errs = append(errs, field("timezone", "must be an IANA time zone name, such as Europe/Paris"))
		}
	}
	if in.StartAt != nil && in.EndAt != nil && !in.EndAt.After(*in.StartAt) {
		errs = append(errs, field("endAt", "must be after startAt"))
	}
	if in.EndAt != nil && !in.EndAt.After(s.now()) {
		errs = append(errs, field("endAt", "must be in the future"))
	}
	return every, errs
}

// isoDuration is an ISO 8601 duration of weeks, days, hours, minutes and seconds.
var isoDuration = regexp.MustCompile(`^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$`)

// ParseISODuration reads an ISO 8601 duration of fixed length: weeks, days, hours,
// minutes and whole seconds (P1D, PT12H, P1DT6H, PT30S). Years and months are refused:
// they have no fixed length; a calendar needs a cron.
func ParseISODuration(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil {
		if date, _, _ := strings.Cut(s, "T"); strings.HasPrefix(s, "P") && strings.ContainsAny(date, "YM") {
			return 0, errors.New("years and months have no fixed length: use cron for a calendar, such as 0 9 1 * * for the 1st of every month")
		}
		return 0, errors.New("must be an ISO 8601 duration of weeks, days, hours, minutes and seconds, such as P1D, PT12H or PT30S")
	}
	// In seconds, each part capped, so that no sum of them wraps.
	const most = 100 * 365 * 24 * 3600
	unitSeconds := []int64{7 * 24 * 3600, 24 * 3600, 3600, 60, 1}
	var seconds int64
	for i, u := range unitSeconds {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > most/u {
			return 0, errors.New("is too long")
		}
		seconds += n * u
	}
	d := time.Duration(seconds) * time.Second
	switch {
	case d == 0:
		return 0, errors.New("must be longer than zero, such as PT1H")
	case seconds > most:
		return 0, errors.New("is too long")
	}
	return d, nil
}

// FormatISODuration writes a duration of whole seconds as ISO 8601 (PT1M, P1DT2H).
func FormatISODuration(d time.Duration) string {
	d = d.Truncate(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	out := "P"
	if days > 0 {
		out += strconv.FormatInt(int64(days), 10) + "D"
	}
	if d > 0 || days == 0 {
		out += "T"
		for _, u := range []struct {
			d    time.Duration
			name string
		}{{time.Hour, "H"}, {time.Minute, "M"}, {time.Second, "S"}} {
			if n := d / u.d; n > 0 {
				out += strconv.FormatInt(int64(n), 10) + u.name
				d -= n * u.d
			}
		}
		if out == "PT" {
			out += "0S"
		}
	}
	return out
}

// visiblePayoutSchedule is a schedule of the caller's organisation in the pay app that is
// not deleted.
func (s *Service) visiblePayoutSchedule(ctx context.Context, who Caller, id string) (*store.PayoutSchedule, error) {
	return s.payoutScheduleOf(ctx, who, id, s.Store.PayoutScheduleOf)
}

func (s *Service) payoutScheduleOf(ctx context.Context, who Caller, id string,
	read func(ctx context.Context, orgID, id string) (*store.PayoutSchedule, error)) (*store.PayoutSchedule, error) {
	p, err := read(ctx, who.OrgID, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (p.App != payments.App || !who.CanReach(p.WalletID))) {
		return nil, refuse(NotFound, "No payout schedule with this id.")
	}
	return p, err
}

// GetPayoutSchedule reads a schedule, with its next run.
func (s *Service) GetPayoutSchedule(ctx context.Context, who Caller, id string) (*PayoutSchedule, error) {
	if err := mayDo(who, payments.App, auth.ActionRead); err != nil {
		return nil, err
	}
	p, err := s.visiblePayoutSchedule(ctx, who, id)
	if err != nil {
		return nil, err
	}
	out := &PayoutSchedule{PayoutSchedule: p}
	if s.Payouts != nil && !p.Paused {
		next, err := s.Payouts.NextRuns(ctx, p.ID)
		if err != nil {
			// The schedule stands; only its next time is not known now.
			s.Log.Warn("next payout run not read", "scheduleId", p.ID, "error", err.Error())
		} else if len(next) > 0 {
			t := next[0].UTC()
			out.NextRunAt = &t
		}
	}
	return out, nil
}

// ListPayoutSchedules pages through the pay app's schedules, newest first.
func (s *Service) ListPayoutSchedules(ctx context.Context, who Caller, pg Page) ([]PayoutSchedule, string, error) {
	if err := mayDo(who, payments.App, auth.ActionRead); err != nil {
		return nil, "", err
	}
	rows, err := s.Store.PayoutSchedules(ctx, who.OrgID, payments.App, pg.After, pg.Limit+1)
	if err != nil {
		return nil, "", err
	}
	rows, next := trim(rows, pg.Limit, func(p *store.PayoutSchedule) string { return p.ID })
	out := make([]PayoutSchedule, 0, len(rows))
	for i := range rows {
		// A key restricted to some wallets sees their schedules only: the page may come
		// out short, and next still follows on from the last one read.
		if who.CanReach(rows[i].WalletID) {
			out = append(out, PayoutSchedule{PayoutSchedule: &rows[i]})
		}
	}
	return out, next, nil
}

// PausePayoutSchedule pauses or resumes a schedule. The store is told first: a run that
// finds its schedule paused makes no order, so a pause holds even before Temporal hears of
// it. Times that pass while paused are skipped, not caught up.
func (s *Service) PausePayoutSchedule(ctx context.Context, who Caller, id string, paused bool) (*PayoutSchedule, error) {
	if err := mayDo(who, payments.App, auth.ActionWrite); err != nil {
		return nil, err
	}
	if s.Payouts == nil {
		return nil, ErrWorkflowsUnavailable
	}
	if _, err := s.visiblePayoutSchedule(ctx, who, id); err != nil {
		return nil, err
	}
	action := map[bool]string{true: "payout_schedule.paused", false: "payout_schedule.resumed"}[paused]
	retry := refuse(Unavailable, "Temporal did not hear of it; the schedule is left paused. Send the same request again.")
	record := func() error {
		return s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.SetPayoutSchedulePaused(ctx, who.OrgID, id, paused, s.now()) },
			action, "payout_schedule", id, nil)
	}
	// Whatever fails, the record is left paused, which is safe: a run of a paused record
	// makes no order. So a pause is recorded before Temporal hears of it, and a resume after.
	if paused {
		if err := record(); err != nil {
			return nil, err
		}
	}
	if err := s.Payouts.SetPaused(ctx, id, paused); err != nil {
		s.Log.Warn("payout schedule's pause not set in Temporal", "scheduleId", id, "paused", paused, "error", err.Error())
		return nil, retry
	}
	if !paused {
		if err := record(); err != nil {
			return nil, err
		}
	}
	// Two changes at once may cross (one's record, the other's Temporal): Temporal is set
	// again to what the record says last.
	for range 3 {
		cur, err := s.Store.PayoutScheduleOf(ctx, who.OrgID, id)
		if err != nil || cur.Paused == paused {
			break
		}
		paused = cur.Paused
		if err := s.Payouts.SetPaused(ctx, id, paused); err != nil {
			return nil, retry
		}
	}
	return s.GetPayoutSchedule(ctx, who, id)
}

// DeletePayoutSchedule deletes a schedule: it runs no more. Its orders stay, naming it.
func (s *Service) DeletePayoutSchedule(ctx context.Context, who Caller, id string) error {
	if err := mayDo(who, payments.App, auth.ActionWrite); err != nil {
		return err
	}
	if s.Payouts == nil {
		return ErrWorkflowsUnavailable
	}
	if _, err := s.visiblePayoutSchedule(ctx, who, id); err != nil {
		return err
	}
	err := s.writeAudited(ctx, who, func(tx *store.Store) error { return tx.DeletePayoutSchedule(ctx, who.OrgID, id, s.now()) },
		"payout_schedule.deleted", "payout_schedule", id, nil)
	if err != nil {
		return err
	}
	if err := s.Payouts.Delete(ctx, id); err != nil {
		// Deleted here, so no run makes an order; Temporal's schedule is left to fire
		// into nothing until it is removed.
		s.Log.Warn("Temporal schedule of a deleted payout schedule not removed", "scheduleId", id, "error", err.Error())
	}
	return nil
}

// PayoutRuns pages through a schedule's runs, the latest due first; those of a deleted
// schedule stay readable, for reconciling what it paid.
func (s *Service) PayoutRuns(ctx context.Context, who Caller, id string, pg Page) ([]PayoutRunView, string, error) {
	if err := mayDo(who, payments.App, auth.ActionRead); err != nil {
		return nil, "", err
	}
	if _, err := s.payoutScheduleOf(ctx, who, id, s.Store.PayoutScheduleEver); err != nil {
		return nil, "", err
	}
	rows, err := s.Store.PayoutRuns(ctx, id, pg.After, pg.Limit+1)
	if err != nil {
		return nil, "", err
	}
	rows, next := trim(rows, pg.Limit, func(r *PayoutRunView) string { return r.NominalTime })
	return rows, next, nil
}

// PayoutKey is the Idempotency-Key under which a schedule's run at a nominal time creates
// and submits its order (SPEC 3.9).
func PayoutKey(scheduleID string, nominal time.Time) string {
	return scheduleID + ":" + workflows.NominalTimeOf(nominal).Format(time.RFC3339)
}

// RunPayout makes and submits the order of a schedule's run at a nominal time (the worker's
// RunPayout activity). It runs the order once however often it is called for that time:
// the first call records the run with the id its order will have, and every later call
// finds that order (made or not yet) and submits it as the same submission, even once the
// schedule is paused or deleted. A run not begun when its schedule is paused or deleted
// makes no order (and a deleted schedule's Temporal Schedule is removed, should it still
// fire). A payment the service refuses for good (its wallet archived, the credential that
// made the schedule revoked) makes none either, and the run says why; one it refuses for
// now (a stale price, Temporal slow) is an error, which the activity retries.
func (s *Service) RunPayout(ctx context.Context, scheduleID string, nominal time.Time) (workflows.PayoutRunResult, error) {
	p, err := s.Store.PayoutScheduleEver(ctx, "", scheduleID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return workflows.PayoutRunResult{}, err
	}
	nominalKey := workflows.NominalTimeOf(nominal).Format(time.RFC3339)
	var run *store.PayoutRun
	if err == nil {
		if run, err = s.Store.PayoutRunOf(ctx, p.ID, nominalKey); err != nil {
			return workflows.PayoutRunResult{}, err
		}
	}
	if run == nil {
		switch {
		case p == nil || p.DeletedAt != nil:
			// Its Temporal Schedule outlived it (a delete that did not reach Temporal).
			if s.Payouts != nil {
				if derr := s.Payouts.Delete(ctx, scheduleID); derr != nil {
					s.Log.Warn("Temporal schedule of a deleted payout schedule not removed", "scheduleId", scheduleID, "error", derr.Error())
				}
			}
			return workflows.PayoutRunResult{Outcome: workflows.PayoutSkipped, Error: "the schedule is deleted"}, nil
		case p.Paused:
			return workflows.PayoutRunResult{Outcome: workflows.PayoutSkipped, Error: "the schedule is paused"}, nil
		}
		now := s.now()
		if run, err = s.Store.ClaimPayoutRun(ctx, &store.PayoutRun{ScheduleID: p.ID, NominalTime: nominalKey,
			OrderID: ids.New(ids.Order), CreatedAt: now, UpdatedAt: now}); err != nil {
			return workflows.PayoutRunResult{}, err
		}
	}
	if run.Error != "" {
		return workflows.PayoutRunResult{Outcome: workflows.PayoutRefused, Error: run.Error}, nil
	}
	key := PayoutKey(p.ID, nominal)
	who := scheduleCaller(p, key)
	refused := func(e *Error) (workflows.PayoutRunResult, error) {
		reason := e.Detail
		for _, f := range e.Fields {
			reason += " " + f.Field + ": " + f.Message + "."
		}
		if err := s.Store.FailPayoutRun(ctx, p.ID, nominalKey, reason, s.now()); err != nil {
			return workflows.PayoutRunResult{}, err
		}
		s.Log.Warn("payout run made no order", "scheduleId", p.ID, "nominalTime", nominalKey, "reason", reason)
		return workflows.PayoutRunResult{Outcome: workflows.PayoutRefused, Error: reason}, nil
	}
	_, _, err = s.Store.Order(ctx, run.OrderID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if e := s.creatorRevoked(ctx, p); e != nil {
			return refused(e)
		}
		_, err = s.createOrder(ctx, who, payments, []byte(p.Payment), scheduledClaim(who, key, p.Payment, s.now()), draftOrigin{orderID: run.OrderID, scheduleID: p.ID})
		var held *store.KeyHeldError
		var e *Error
		switch {
		case errors.As(err, &held):
			// Another attempt of this run made the order meanwhile, or a request took the
			// run's key; the order's presence tells which.
			_, _, oerr := s.Store.Order(ctx, run.OrderID)
			if errors.Is(oerr, store.ErrNotFound) {
				return refused(refuse(Conflict, "The Idempotency-Key "+key+" is held by another request."))
			}
			if oerr != nil {
				return workflows.PayoutRunResult{}, oerr
			}
		case errors.As(err, &e) && (e.Kind == PriceUnavailable || e.Kind == Unavailable):
			// For now only: the price comes back, Temporal answers again.
			return workflows.PayoutRunResult{}, fmt.Errorf("create the order of %s: %w", key, err)
		case errors.As(err, &e):
			return refused(e)
		case err != nil:
			return workflows.PayoutRunResult{}, err
		}
	case err != nil:
		return workflows.PayoutRunResult{}, err
	}
	_, err = s.SubmitOrder(ctx, who, payments, run.OrderID)
	var e *Error
	switch {
	case err == nil:
		return workflows.PayoutRunResult{OrderID: run.OrderID, Outcome: workflows.PayoutSubmitted}, nil
	case errors.As(err, &e) && e.Kind == PolicyViolation:
		return workflows.PayoutRunResult{OrderID: run.OrderID, Outcome: workflows.PayoutRejected, Error: e.Detail}, nil
	case errors.As(err, &e) && e.Kind == Conflict:
		// Submitted by another submission first (a person, from its draft): it is on its way.
		return workflows.PayoutRunResult{OrderID: run.OrderID, Outcome: workflows.PayoutSubmitted, Error: e.Detail}, nil
	}
	return workflows.PayoutRunResult{}, fmt.Errorf("submit %s: %w", run.OrderID, err)
}

// creatorRevoked refuses a run whose schedule's creator can no longer write on pay: its key
// or OAuth client revoked, or its person gone or without write. A schedule pays with the
// authority it was made with, so it ends with that authority.
func (s *Service) creatorRevoked(ctx context.Context, p *store.PayoutSchedule) *Error {
	gone := refuse(PermissionDenied, "The credential that made this schedule ("+p.CreatedBy+") can no longer write on pay: "+
		"its runs make no orders. Delete the schedule, and make it again with a live credential.")
	switch p.ActorKind {
	case auth.KindUser:
		u, err := s.Store.UserInOrg(ctx, p.OrgID, p.CreatedBy)
		if err != nil {
			return gone
		}
		if u.Role == auth.RoleOwner {
			return nil
		}
		perms, err := s.Store.MemberPermissions(ctx, u.ID)
		if err != nil {
			return gone
		}
		for _, perm := range perms {
			if perm.App == p.App && slices.Contains(auth.ParseActions(perm.Actions), auth.ActionWrite) {
				return nil
			}
		}
		return gone
	default:
		revoked, err := s.Store.CredentialRevoked(ctx, p.CreatedBy)
		if err != nil || revoked {
			return gone
		}
		return nil
	}
}

// scheduleCaller is who a schedule's run acts as: the credential that created the
// schedule, with the person behind it, writing in the pay app.
func scheduleCaller(p *store.PayoutSchedule, key string) Caller {
	return Caller{Principal: &auth.Principal{OrgID: p.OrgID, App: p.App, Kind: p.ActorKind, ID: p.CreatedBy, Person: p.CreatedByUser,
		Actions: []string{auth.ActionRead, auth.ActionWrite}}, CorrelationID: key, IdempotencyKey: key}
}

// scheduledClaim is the Idempotency-Key record of a run's order create, as the API would
// have made it for the same request by the schedule's credential.
func scheduledClaim(who Caller, key, body string, now time.Time) *store.IdempotencyRecord {
	path := apitypes.BasePath + "/" + payments.Collection
	sum := sha256.Sum256([]byte(who.ID + "\nPOST\n" + path + "\n" + body))
	return &store.IdempotencyRecord{OrgID: who.OrgID, Key: key, Method: "POST", Path: path, Fingerprint: hex.EncodeToString(sum[:]),
		CreatedAt: now, ExpiresAt: now.Add(scheduledKeyRetention)}
}
