package store

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Idempotency record states.
const (
	IdempotencyInFlight = "in_flight"
	IdempotencyDone     = "done"
)

// ErrIdempotencyTaken means another request holds the key.
var ErrIdempotencyTaken = errors.New("store: idempotency key taken")

// errKeyContended: the key's record came and went between two looks.
var errKeyContended = errors.New("store: idempotency key contended; retry")

// ClaimIdempotencyKey records that a request has started under (orgID, key). It returns
// nil when this request now owns the key. Otherwise it returns ErrIdempotencyTaken and the
// record that holds the key. An expired record, or an in-flight one older than
// abandonedBefore (its request died), is taken over.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, rec *IdempotencyRecord, abandonedBefore time.Time) (*IdempotencyRecord, error) {
	rec.State = IdempotencyInFlight
	rec.CreatedAt, rec.ExpiresAt = idemTime(rec.CreatedAt), idemTime(rec.ExpiresAt)
	for attempt := 0; attempt < 3; attempt++ {
		res := s.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(rec)
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected == 1 {
			return nil, nil
		}
		cur, err := s.IdempotencyRecordOf(ctx, rec.OrgID, rec.Key)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			continue // deleted between the insert and the read: try again
		}
		stale := cur.ExpiresAt.Before(rec.CreatedAt) ||
			(cur.State == IdempotencyInFlight && cur.CreatedAt.Before(abandonedBefore))
		if !stale {
			return cur, ErrIdempotencyTaken
		}
		// Take the stale record over only if nobody else did meanwhile.
		res = s.with(ctx).Model(&IdempotencyRecord{}).
			Where("org_id = ? AND key = ? AND state = ? AND created_at = ?", cur.OrgID, cur.Key, cur.State, cur.CreatedAt).
			Updates(map[string]any{
				"method": rec.Method, "path": rec.Path, "fingerprint": rec.Fingerprint, "state": IdempotencyInFlight,
				"status_code": 0, "response_headers": "", "response_body": nil,
				"created_at": rec.CreatedAt, "expires_at": rec.ExpiresAt,
			})
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected == 1 {
			return nil, nil
		}
	}
	return nil, errKeyContended
}

// IdempotencyRecordOf reads the record that holds (orgID, key), nil when none does.
func (s *Store) IdempotencyRecordOf(ctx context.Context, orgID, key string) (*IdempotencyRecord, error) {
	var cur IdempotencyRecord
	err := s.with(ctx).Where("org_id = ? AND key = ?", orgID, key).Take(&cur).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &cur, nil
}

// FoldedIdempotency is the Idempotency-Key record of a request that creates an order,
// stored by the order's own transaction, done, with the response Render makes of the
// order: the order and the record that answers its retries commit together or not at all,
// and the request costs one write transaction instead of three (claim, order, completion).
type FoldedIdempotency struct {
	// Record is the request's record (its org, key, method, path, fingerprint and times);
	// once stored, it holds the response too.
	Record *IdempotencyRecord
	// Render gives the response to the request that created o.
	Render func(o *Order, legs []OrderLeg) (status int, headers string, body []byte, err error)

	// Stored reports that the transaction committed with the record; Held is the record
	// that had the key already when the transaction tried (the order was not created, and
	// CreateOrder returned ErrIdempotencyTaken).
	Stored bool
	Held   *IdempotencyRecord
}

type foldedKey struct{}

// WithFoldedIdempotency asks the order created under ctx to store f's record with it.
func WithFoldedIdempotency(ctx context.Context, f *FoldedIdempotency) context.Context {
	return context.WithValue(ctx, foldedKey{}, f)
}

func foldedIdempotency(ctx context.Context) *FoldedIdempotency {
	f, _ := ctx.Value(foldedKey{}).(*FoldedIdempotency)
	return f
}

// storeFolded inserts f's record, done, in the transaction that created o.
func (s *Store) storeFolded(ctx context.Context, f *FoldedIdempotency, o *Order, legs []OrderLeg) error {
	status, headers, body, err := f.Render(o, legs)
	if err != nil {
		return err
	}
	rec := f.Record
	rec.State, rec.StatusCode, rec.ResponseHeaders, rec.ResponseBody = IdempotencyDone, status, headers, body
	rec.CreatedAt, rec.ExpiresAt = idemTime(rec.CreatedAt), idemTime(rec.ExpiresAt)
	res := s.with(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(rec)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 1 {
		return nil
	}
	// Another request took the key first (and has committed: SQLite runs one writer at a
	// time, PostgreSQL waited for it): this request is answered from its record.
	cur, err := s.IdempotencyRecordOf(ctx, rec.OrgID, rec.Key)
	if err != nil {
		return err
	}
	if cur == nil {
		return errKeyContended
	}
	f.Held = cur
	return ErrIdempotencyTaken
}

// CompleteIdempotencyKey stores the response of the request that owns the key.
func (s *Store) CompleteIdempotencyKey(ctx context.Context, orgID, key string, createdAt time.Time, status int, headers string, body []byte) error {
	createdAt = idemTime(createdAt)
	return s.with(ctx).Model(&IdempotencyRecord{}).
		Where("org_id = ? AND key = ? AND state = ? AND created_at = ?", orgID, key, IdempotencyInFlight, createdAt).
		Updates(map[string]any{"state": IdempotencyDone, "status_code": status, "response_headers": headers, "response_body": body}).Error
}

// ReleaseIdempotencyKey forgets an in-flight claim, so that a retry may run the request again
// (used when the first attempt failed in a way worth retrying).
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, orgID, key string, createdAt time.Time) error {
	createdAt = idemTime(createdAt)
	return s.with(ctx).
		Where("org_id = ? AND key = ? AND state = ? AND created_at = ?", orgID, key, IdempotencyInFlight, createdAt).
		Delete(&IdempotencyRecord{}).Error
}

// idemTime is how a claim's time is stored: UTC, microseconds (PostgreSQL's precision), so
// that the owner can match its own claim exactly on both databases.
func idemTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
