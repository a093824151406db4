package store

import (
	"context"
	"fmt"
	"time"
)

// Expiring is a kind of row that maintenance deletes once it is past its retention: its
// table, the table's key, and the time column a cutoff is held against. Every such column
// is indexed, so that finding a batch reads only the rows the batch deletes.
type Expiring struct {
	// Table is the table's name, as reports give it.
	Table string
	key   string
	// column is compared with the cutoff; also narrows the rows further.
	column, also string
}

// The kinds of rows maintenance keeps bounded. Orders, their history and legs, approvals,
// policies and the audit log are the service's record and are never deleted.
var (
	// ExpiringEvents are stored events, by when they occurred.
	ExpiringEvents = Expiring{Table: "events", key: "id", column: "occurred_at"}
	// ExpiringWebhookDeliveries are webhook deliveries that have ended (succeeded, failed
	// or skipped), by when they did; their attempts go with them (ON DELETE CASCADE, which
	// SQLite enforces too: SQLiteDSN turns foreign keys on). A pending delivery is never
	// deleted, however old.
	ExpiringWebhookDeliveries = Expiring{Table: "webhook_deliveries", key: "id", column: "completed_at",
		also: "status <> '" + DeliveryPending + "'"}
	// ExpiringRequestLogs are request logs, by when the request came.
	ExpiringRequestLogs = Expiring{Table: "request_logs", key: "id", column: "at"}
	// ExpiringIdempotencyRecords are Idempotency-Key records, by the expiry the API gave
	// each when it was written.
	ExpiringIdempotencyRecords = Expiring{Table: "idempotency_records", key: "org_id, key", column: "expires_at"}
	// ExpiringOAuthTokens are OAuth access tokens, by their expiry.
	ExpiringOAuthTokens = Expiring{Table: "oauth_tokens", key: "token_hash", column: "expires_at"}
	// ExpiringSessions are console sessions, by their expiry.
	ExpiringSessions = Expiring{Table: "sessions", key: "token_hash", column: "expires_at"}
	// ExpiringSignInLinks are one-time sign-in links, used or not, by their expiry.
	ExpiringSignInLinks = Expiring{Table: "sign_in_links", key: "token_hash", column: "expires_at"}
	// ExpiringWalletChallenges are wallet registration challenges, by their expiry.
	ExpiringWalletChallenges = Expiring{Table: "wallet_challenges", key: "id", column: "expires_at"}
)

// Deleted is what DeleteExpired removed and what that cost.
type Deleted struct {
	Rows    int64
	Batches int
	// Took is the batches' time together; Longest is the longest batch's: the longest a
	// writer waited on maintenance (on SQLite every writer waits for a batch to commit; on
	// PostgreSQL only one that writes the rows being deleted).
	Took, Longest time.Duration
}

// DeleteExpired removes the rows of a kind whose time falls before cutoff, oldest first,
// at most batch rows per statement, each statement in a transaction of its own: no table
// is locked for longer than one batch takes, and on SQLite other writers take their turns
// between batches at the writer gate. It goes on until a batch comes back short, or ctx
// ends; after each batch it hands progress (when not nil) the totals so far.
func (s *Store) DeleteExpired(ctx context.Context, kind Expiring, cutoff time.Time, batch int, progress func(Deleted)) (Deleted, error) {
	var done Deleted
	if batch <= 0 {
		return done, fmt.Errorf("store: delete from %s in batches of %d rows", kind.Table, batch)
	}
	where := kind.column + " < ?"
	if kind.also != "" {
		where += " AND " + kind.also
	}
	// The key is chosen by a subquery because neither database takes LIMIT on a DELETE as
	// written (PostgreSQL has none, and SQLite only when built with it).
	stmt := fmt.Sprintf("DELETE FROM %[1]s WHERE (%[2]s) IN (SELECT %[2]s FROM %[1]s WHERE %[3]s ORDER BY %[4]s LIMIT ?)",
		kind.Table, kind.key, where, kind.column)
	cutoff = cutoff.UTC()
	for {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		start := time.Now()
		var n int64
		err := s.Tx(ctx, func(tx *Store) error {
			res := tx.with(ctx).Exec(stmt, cutoff, batch)
			n = res.RowsAffected
			return res.Error
		})
		if err != nil {
			return done, fmt.Errorf("store: delete expired %s: %w", kind.Table, err)
		}
		took := time.Since(start)
		done.Rows += n
		done.Batches++
		done.Took += took
		done.Longest = max(done.Longest, took)
		if progress != nil {
			progress(done)
		}
		if n < int64(batch) {
			return done, nil
		}
	}
}

// BoundedTables are the tables maintenance keeps bounded: those of the Expiring kinds, and
// webhook_attempts, whose rows go with their deliveries.
var BoundedTables = []string{ExpiringEvents.Table, ExpiringWebhookDeliveries.Table, "webhook_attempts",
	ExpiringRequestLogs.Table, ExpiringIdempotencyRecords.Table, ExpiringOAuthTokens.Table, ExpiringSessions.Table,
	ExpiringSignInLinks.Table, ExpiringWalletChallenges.Table}

// RowCounts counts the rows of each of BoundedTables, whatever their age: what a soak
// watches level off.
func (s *Store) RowCounts(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64, len(BoundedTables))
	for _, table := range BoundedTables {
		var n int64
		if err := s.with(ctx).Table(table).Count(&n).Error; err != nil {
			return nil, err
		}
		out[table] = n
	}
	return out, nil
}
