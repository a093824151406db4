package store

import (
	"context"
	"errors"
	"time"

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
	err := s.take(ctx, &cur, idempotencyRecordOf, orgID, key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &cur, nil
}

var idempotencyRecordOf = sqlStatement(`org_id = ? AND key = ?`)

// KeyHeldError is ErrIdempotencyTaken with the record that held the key: another request
// took it first, and no order was created.
type KeyHeldError struct{ Held *IdempotencyRecord }

func (e *KeyHeldError) Error() string        { return ErrIdempotencyTaken.Error() }
func (e *KeyHeldError) Is(target error) bool { return target == ErrIdempotencyTaken }

// storeAnswer inserts rec, the request's Idempotency-Key record holding its answer, done,
// in the transaction that creates what the request asked for.
func (s *Store) storeAnswer(ctx context.Context, rec *IdempotencyRecord) error {
	done := *rec
	done.State, done.CreatedAt, done.ExpiresAt = IdempotencyDone, idemTime(rec.CreatedAt), idemTime(rec.ExpiresAt)
	stored, err := s.insert(ctx, &done, insertOrSkip)
	if err != nil {
		return err
	}
	if stored == 1 {
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
	return &KeyHeldError{Held: cur}
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
