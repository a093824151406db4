package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opentreasury/treasury/auditchain"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/migrations"
)

// AppendAudit writes one audit record and places it at the end of its organisation's
// chain: the next seq, the hash of the record before it, its own hash. Outside a
// transaction it runs in one of its own. One writer at a time places records, so the
// chain has no gap and no fork:
//
//   - On SQLite, whose write transactions run one at a time, the record is written in
//     its place, after the head its transaction reads.
//   - On PostgreSQL it is written unplaced, and placed once its transaction has
//     committed (Tx waits for that): a short transaction holding the organisation's
//     chain lock (an advisory lock) places every record of the organisation still
//     unplaced, in the order of their times, those of the writers that committed
//     meanwhile with it. Holding a lock on the head until each writer's commit would let
//     the organisation's transactions commit one at a time, each waiting for the disk;
//     this way their commits flush together, and one flush places a batch.
//
// A record written before the chain existed, or whose process stopped between its commit
// and its placing, is placed at the next start (Migrate), or on PostgreSQL by the
// organisation's next append.
func (s *Store) AppendAudit(ctx context.Context, a *AuditLog) error {
	if !s.inTx() {
		return s.Tx(ctx, func(tx *Store) error { return tx.AppendAudit(ctx, a) })
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = time.Now()
	}
	// The chain hashes the time as the API shows it, to the millisecond, and the record
	// keeps exactly that time; its details are kept as they are hashed, canonically.
	a.CreatedAt = a.CreatedAt.UTC().Truncate(time.Millisecond)
	a.Details = string(auditchain.DetailsOf(a.Details))
	if s.dialect == migrations.SQLite {
		head, err := s.auditHead(ctx, a.OrgID)
		if err != nil {
			return err
		}
		if err := a.chainAfter(head, true); err != nil {
			return err
		}
		if _, err := s.insert(ctx, a, insertOrFail); err != nil {
			return err
		}
		return s.moveAuditHead(ctx, a.OrgID, auditchain.Head{Seq: a.Seq, Hash: a.Hash})
	}
	a.Seq, a.PrevHash, a.Hash = 0, "", ""
	if _, err := s.insert(ctx, a, insertOrFail, "Seq", "PrevHash", "Hash"); err != nil {
		return err
	}
	*s.audited = append(*s.audited, a.OrgID)
	return nil
}

// ImportAudit appends records to an organisation's chain in bulk, placed in the order
// given, in one transaction under the chain's lock: an organisation's history brought in
// at once (the benches' large chains), not the way the service writes as it acts.
func (s *Store) ImportAudit(ctx context.Context, orgID string, records []AuditLog) error {
	return s.Tx(ctx, func(tx *Store) error {
		if err := tx.lockAuditChain(ctx, orgID); err != nil {
			return err
		}
		head, err := tx.auditHead(ctx, orgID)
		if err != nil {
			return err
		}
		for i := range records {
			a := &records[i]
			a.OrgID, a.CreatedAt, a.Details = orgID, a.CreatedAt.UTC().Truncate(time.Millisecond), string(auditchain.DetailsOf(a.Details))
			if err := a.chainAfter(head, true); err != nil {
				return err
			}
			head = auditchain.Head{Seq: a.Seq, Hash: a.Hash}
		}
		if err := tx.with(ctx).CreateInBatches(records, 500).Error; err != nil {
			return err
		}
		return tx.moveAuditHead(ctx, orgID, head)
	})
}

// chainAfter places the record after head: its seq, its prevHash and its hash. canonical
// says its details are already written canonically (DetailsOf, just now), as a record
// read back from the database may not be.
func (a *AuditLog) chainAfter(head auditchain.Head, canonical bool) error {
	a.Seq, a.PrevHash = head.Seq+1, head.Hash
	details := json.RawMessage(a.Details)
	if !canonical {
		details = auditchain.DetailsOf(a.Details)
	}
	e := a.entry(details)
	hash, err := auditchain.Hash(&e)
	a.Hash = hash
	return err
}

// auditHead is the organisation's chain head, seq 0 and the genesis hash before its
// first record.
func (s *Store) auditHead(ctx context.Context, orgID string) (auditchain.Head, error) {
	h := auditchain.Head{Hash: auditchain.Genesis}
	err := s.queryRow(ctx, auditHeadQuery, orgID).Scan(&h.Seq, &h.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return h, nil
	}
	return h, err
}

// The head of an organisation's audit chain: its last seq and hash.
var (
	auditHeadQuery = sqlStatement(`SELECT seq, hash FROM audit_chain_heads WHERE org_id = ?`)
	moveAuditHead  = sqlStatement(`INSERT INTO audit_chain_heads (org_id, seq, hash) VALUES (?, ?, ?)
		ON CONFLICT (org_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`)
)

// moveAuditHead sets the organisation's chain head; the caller holds the chain lock.
func (s *Store) moveAuditHead(ctx context.Context, orgID string, head auditchain.Head) error {
	_, err := s.exec(ctx, moveAuditHead, orgID, head.Seq, head.Hash)
	return err
}

// inTx reports whether the store is bound to a transaction (see Tx).
func (s *Store) inTx() bool { return s.appended != nil }

// chainTimeout bounds placing a committed transaction's records in their chains.
const chainTimeout = 10 * time.Second

// chainCommitted places the audit records a transaction wrote, now committed, in the
// chains of their organisations (orgIDs, PostgreSQL), and returns once they are. The
// change and its record are committed whatever happens here, so a failure does not fail
// the caller: the record waits, unplaced, for the organisation's next append or the next
// start.
func (s *Store) chainCommitted(ctx context.Context, orgIDs []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), chainTimeout)
	defer cancel()
	placed := map[string]bool{}
	for _, orgID := range orgIDs {
		if !placed[orgID] {
			placed[orgID] = true
			_ = s.chainers.place(ctx, s, orgID)
		}
	}
}

// auditChainers coalesce, per organisation, the rounds in which this process places the
// records its transactions committed: one round runs at a time, and the writers that
// committed while it ran wait for the next, which places all their records at once.
// Without them each writer would run a chaining transaction of its own, one after the
// other.
type auditChainers struct {
	mu   sync.Mutex
	orgs map[string]*auditRounds
}

// auditRounds are an organisation's rounds: turn is held by the round running; started
// and finished number the rounds (guarded by auditChainers.mu).
type auditRounds struct {
	turn              chan struct{}
	started, finished int64
}

// place returns once a round that began after the call has placed the organisation's
// committed records: it waits for the round running, if any, and runs the next unless
// another writer waiting with it has run it already.
func (c *auditChainers) place(ctx context.Context, s *Store, orgID string) error {
	c.mu.Lock()
	r := c.orgs[orgID]
	if r == nil {
		r = &auditRounds{turn: make(chan struct{}, 1)}
		c.orgs[orgID] = r
	}
	// Rounds up to this one may have read the unplaced records before ours committed.
	begun := r.started
	c.mu.Unlock()
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.turn }()
	c.mu.Lock()
	if r.finished > begun {
		c.mu.Unlock()
		return nil
	}
	r.started++
	round := r.started
	c.mu.Unlock()
	_, err := s.chainOrganization(ctx, orgID)
	c.mu.Lock()
	r.finished = round
	c.mu.Unlock()
	return err
}

// chainOrganization places every unplaced record of the organisation in its chain, a
// batch per transaction, and returns how many it placed. Each transaction takes the
// organisation's chain lock first, so the processes placing records take turns; one that
// finds nothing left (another placed them) commits having written nothing.
func (s *Store) chainOrganization(ctx context.Context, orgID string) (int, error) {
	total := 0
	for {
		chained := 0
		err := s.Tx(ctx, func(tx *Store) error {
			if err := tx.lockAuditChain(ctx, orgID); err != nil {
				return err
			}
			var err error
			chained, err = tx.chainPending(ctx, orgID)
			return err
		})
		total += chained
		// A batch not full placed every record unplaced when it began.
		if err != nil || chained < auditBatch {
			return total, err
		}
	}
}

// auditBatch is how many records one chaining transaction places at most, on PostgreSQL
// and at start-up.
const auditBatch = 500

// lockAuditChain takes the organisation's chain lock until the transaction ends: on
// PostgreSQL an advisory lock (it writes nothing, so a chainer that finds nothing to do
// commits without waiting for the disk); on SQLite the transaction's write lock is one.
func (s *Store) lockAuditChain(ctx context.Context, orgID string) error {
	if s.dialect != migrations.Postgres {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte("treasury audit chain\x00" + orgID))
	return s.with(ctx).Exec("SELECT pg_advisory_xact_lock(?)", int64(h.Sum64())).Error
}

// chainPending places the organisation's oldest unplaced records, a batch of them, after
// its chain's head, and moves the head on. The caller holds the chain lock. It returns
// how many it placed.
func (s *Store) chainPending(ctx context.Context, orgID string) (int, error) {
	var rows []AuditLog
	err := s.with(ctx).Where("org_id = ? AND seq IS NULL", orgID).Order("created_at, id").Limit(auditBatch).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	head, err := s.auditHead(ctx, orgID)
	if err != nil {
		return 0, err
	}
	// One statement places the batch: SET seq = CASE id WHEN … THEN … END, and the same
	// for prev_hash and hash.
	var seqs, prevs, hashes, ids strings.Builder
	var seqArgs, prevArgs, hashArgs, idArgs []any
	for i := range rows {
		a := &rows[i]
		if err := a.chainAfter(head, false); err != nil {
			return 0, err
		}
		head = auditchain.Head{Seq: a.Seq, Hash: a.Hash}
		seqs.WriteString(" WHEN ? THEN CAST(? AS BIGINT)")
		prevs.WriteString(" WHEN ? THEN ?")
		hashes.WriteString(" WHEN ? THEN ?")
		seqArgs, prevArgs, hashArgs = append(seqArgs, a.ID, a.Seq), append(prevArgs, a.ID, a.PrevHash), append(hashArgs, a.ID, a.Hash)
		if i > 0 {
			ids.WriteString(", ")
		}
		ids.WriteString("?")
		idArgs = append(idArgs, a.ID)
	}
	err = s.with(ctx).Exec("UPDATE audit_logs SET seq = CASE id"+seqs.String()+" END, prev_hash = CASE id"+prevs.String()+
		" END, hash = CASE id"+hashes.String()+" END WHERE id IN ("+ids.String()+")",
		slices.Concat(seqArgs, prevArgs, hashArgs, idArgs)...).Error
	if err != nil {
		return 0, err
	}
	return len(rows), s.moveAuditHead(ctx, orgID, head)
}

// ChainEntry is the record as its chain holds it: what its hash covers, and what an
// export writes.
func (a *AuditLog) ChainEntry() auditchain.Entry {
	return a.entry(auditchain.DetailsOf(a.Details))
}

func (a *AuditLog) entry(details json.RawMessage) auditchain.Entry {
	return auditchain.Entry{Seq: a.Seq, OrgID: a.OrgID, Record: a.Record(details), PrevHash: a.PrevHash, Hash: a.Hash}
}

// Record is what the record says, with its details as given.
func (a *AuditLog) Record(details json.RawMessage) auditchain.Record {
	return auditchain.Record{ID: a.ID, App: a.App, Actor: auditchain.Actor{ID: a.ActorID, Type: a.ActorType}, Action: a.Action,
		ResourceType: a.ResourceType, ResourceID: a.ResourceID, CorrelationID: a.CorrelationID, Details: details,
		CreatedAt: events.TimeOf(a.CreatedAt)}
}

// AuditHead is the head of the organisation's audit chain as last committed; nil before
// its first record.
func (s *Store) AuditHead(ctx context.Context, orgID string) (*auditchain.Head, error) {
	head, err := s.auditHead(ctx, orgID)
	if err != nil || head.Seq == 0 {
		return nil, err
	}
	return &head, nil
}

// AuditChain reads the organisation's chain in seq order: the records after seq after,
// up to seq through, at most limit of them.
func (s *Store) AuditChain(ctx context.Context, orgID string, after, through int64, limit int) ([]AuditLog, error) {
	var out []AuditLog
	err := s.with(ctx).Where("org_id = ? AND seq > ? AND seq <= ?", orgID, after, through).
		Order("seq").Limit(limit).Find(&out).Error
	return out, err
}

// AuditSeqFrom is the seq of the organisation's first chained record written at or after
// t (by time, then seq), 0 when there is none. Records are stamped before they take their
// place in the chain, so times and seqs may disagree by the moments between; a window's
// ends found this way still meet the next window's exactly.
func (s *Store) AuditSeqFrom(ctx context.Context, orgID string, t time.Time) (int64, error) {
	var seqs []int64
	err := s.with(ctx).Model(&AuditLog{}).Where("org_id = ? AND created_at >= ? AND seq IS NOT NULL", orgID, t.UTC()).
		Order("created_at, seq").Limit(1).Pluck("seq", &seqs).Error
	if err != nil || len(seqs) == 0 {
		return 0, err
	}
	return seqs[0], nil
}

// chainAuditBacklog chains the audit records that have no place in their organisation's
// chain: those written before the chain existed (once, after the migration that added
// it), and any left by a process that stopped before placing them or by a process of an
// earlier version during an upgrade. It returns how many it placed.
func (s *Store) chainAuditBacklog(ctx context.Context) (int, error) {
	var orgs []string
	if err := s.with(ctx).Model(&AuditLog{}).Where("seq IS NULL").Distinct().Pluck("org_id", &orgs).Error; err != nil {
		return 0, err
	}
	chained := 0
	for _, orgID := range orgs {
		n, err := s.chainOrganization(ctx, orgID)
		chained += n
		if err != nil {
			return chained, err
		}
	}
	return chained, nil
}
