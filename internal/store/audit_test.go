package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opentreasury/treasury/auditchain"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/migrations"
)

func auditRecord(org, action string, at time.Time) *store.AuditLog {
	return &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: org, App: "pay", ActorType: "key", ActorID: "key_1",
		Action: action, ResourceType: "order", ResourceID: "ord_1", CorrelationID: "c", Details: `{"b": 2, "a": "<1>"}`, CreatedAt: at}
}

// verifyStoredChain checks the organisation's whole chain against its stored head.
func verifyStoredChain(t *testing.T, s *store.Store, org string) auditchain.Result {
	t.Helper()
	head, err := s.AuditHead(ctx, org)
	if err != nil || head == nil {
		t.Fatalf("head of %s: %v %v", org, head, err)
	}
	v := &auditchain.Verifier{FromGenesis: true, Want: head}
	rows, err := s.AuditChain(ctx, org, 0, head.Seq, int(head.Seq)+10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		e := rows[i].ChainEntry()
		v.Add(&e)
	}
	return v.Result()
}

func TestAuditChainLinksEachOrganisationsRecords(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org, other := mustOrg(t, s), mustOrg(t, s)
		if head, err := s.AuditHead(ctx, org); err != nil || head != nil {
			t.Fatalf("head before the first record: %v %v", head, err)
		}
		now := time.Now()
		first := auditRecord(org, "one", now)
		if err := s.AppendAudit(ctx, first); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendAudit(ctx, auditRecord(other, "elsewhere", now)); err != nil {
			t.Fatal(err)
		}
		// Two in one transaction, and one in a transaction that rolls back: it takes no seq.
		err := s.Tx(ctx, func(tx *store.Store) error {
			if err := tx.AppendAudit(ctx, auditRecord(org, "two", now)); err != nil {
				return err
			}
			return tx.AppendAudit(ctx, auditRecord(org, "three", now))
		})
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		if err := s.Tx(ctx, func(tx *store.Store) error {
			if err := tx.AppendAudit(ctx, auditRecord(org, "rolled back", now)); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("want boom, got %v", err)
		}
		last := auditRecord(org, "four", now)
		if err := s.AppendAudit(ctx, last); err != nil {
			t.Fatal(err)
		}

		rows, err := s.AuditChain(ctx, org, 0, 100, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, r := range rows {
			got = append(got, r.Action)
			if r.Seq != int64(i+1) {
				t.Errorf("%s has seq %d, want %d", r.Action, r.Seq, i+1)
			}
		}
		if fmt.Sprint(got) != "[one two three four]" {
			t.Fatalf("the chain holds %v", got)
		}
		if rows[0].PrevHash != auditchain.Genesis || rows[1].PrevHash != rows[0].Hash {
			t.Errorf("links: %q → %q, %q → %q", rows[0].PrevHash, rows[0].Hash, rows[1].PrevHash, rows[1].Hash)
		}
		// The record as stored is the record as hashed: canonical details, milliseconds.
		if rows[0].Details != `{"a":"<1>","b":2}` || !rows[0].CreatedAt.Equal(now.Truncate(time.Millisecond)) {
			t.Errorf("stored %s at %v", rows[0].Details, rows[0].CreatedAt)
		}
		if first.ID != rows[0].ID || last.ID != rows[3].ID {
			t.Errorf("the appended records were not given their places: %+v %+v", first, last)
		}
		if res := verifyStoredChain(t, s, org); res.Broken != nil || res.Entries != 4 || res.Head.Hash != rows[3].Hash {
			t.Errorf("verification: %+v %v", res, res.Broken)
		}
		if res := verifyStoredChain(t, s, other); res.Broken != nil || res.Entries != 1 {
			t.Errorf("the other organisation's chain: %+v %v", res, res.Broken)
		}
	})
}

// Writers of one organisation, many at once in two processes, some inside transactions
// that write other rows first, keep one chain: every seq from 1 to N once, each linked to
// the one before.
func TestAuditChainHasNoGapsUnderConcurrentWrites(t *testing.T) {
	storetest.ForEachDialectInTwoProcesses(t, func(t *testing.T, s, replica *store.Store) {
		org, other := mustOrg(t, s), mustOrg(t, s)
		const writers, each = 16, 8
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := s
				if w%2 == 1 {
					s = replica
				}
				for i := range each {
					a := auditRecord(org, fmt.Sprintf("w%d.%d", w, i), time.Now())
					var err error
					switch i % 3 {
					case 0:
						err = s.AppendAudit(ctx, a)
					case 1:
						err = s.Tx(ctx, func(tx *store.Store) error {
							if err := tx.CreateOrganization(ctx, &store.Organization{ID: ids.New(ids.Organization), Name: "x", CreatedAt: time.Now()}); err != nil {
								return err
							}
							return tx.AppendAudit(ctx, a)
						})
					default:
						err = s.AppendAudit(ctx, auditRecord(other, a.Action, time.Now()))
						if err == nil {
							err = s.AppendAudit(ctx, a)
						}
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		rows, err := s.AuditChain(ctx, org, 0, writers*each, writers*each+1)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != writers*each {
			t.Fatalf("%d records in the chain, want %d", len(rows), writers*each)
		}
		for i, r := range rows {
			if r.Seq != int64(i+1) {
				t.Fatalf("position %d holds seq %d", i+1, r.Seq)
			}
		}
		for _, o := range []string{org, other} {
			if res := verifyStoredChain(t, s, o); res.Broken != nil {
				t.Errorf("chain of %s: %v", o, res.Broken)
			}
		}
	})
}

// Records written before the chain existed (or by an earlier version during an upgrade)
// are chained by Migrate, after the chained ones, oldest first; a second Migrate finds
// nothing to do.
func TestAuditBacklogIsChainedOldestFirst(t *testing.T) {
	storetest.ForEachDialectWithSQL(t, func(t *testing.T, s *store.Store, db *sql.DB) {
		org := mustOrg(t, s)
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		if err := s.AppendAudit(ctx, auditRecord(org, "chained", base)); err != nil {
			t.Fatal(err)
		}
		// Ids out of time order, and times finer than a millisecond: the chain follows the
		// times, and hashes them as the API shows them.
		for _, r := range []struct {
			id     string
			action string
			at     time.Time
		}{{"aud_3", "third", base.Add(3*time.Second + 1234*time.Microsecond)}, {"aud_1", "second", base.Add(2 * time.Second)},
			{"aud_2", "fourth", base.Add(4 * time.Second)}} {
			_, err := db.ExecContext(ctx, `INSERT INTO audit_logs (id, org_id, app, actor_type, actor_id, action, resource_type,
				resource_id, correlation_id, details, created_at) VALUES ($1, $2, 'pay', 'key', 'key_1', $3, 'order', 'ord_1', 'c',
				'{"legacy": true}', $4)`, r.id, org, r.action, r.at)
			if err != nil {
				t.Fatal(err)
			}
		}
		// Until chained, the records still list.
		if list, err := s.ListAudit(ctx, org, []string{"pay"}, nil, "", 10); err != nil || len(list) != 4 {
			t.Fatalf("list before chaining: %d %v", len(list), err)
		}
		if err := s.Migrate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		rows, err := s.AuditChain(ctx, org, 0, 10, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%d:%s", r.Seq, r.Action))
		}
		if fmt.Sprint(got) != "[1:chained 2:second 3:third 4:fourth]" {
			t.Fatalf("chained %v", got)
		}
		if res := verifyStoredChain(t, s, org); res.Broken != nil || res.Entries != 4 {
			t.Fatalf("verification after chaining: %+v %v", res, res.Broken)
		}
		head, _ := s.AuditHead(ctx, org)
		if err := s.Migrate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if again, _ := s.AuditHead(ctx, org); *again != *head {
			t.Fatalf("a second Migrate moved the head from %v to %v", head, again)
		}
		// A record written but not placed (on PostgreSQL its process stopped in between) is
		// placed by the organisation's next append, before it; on SQLite, where records are
		// placed as they are written and only an earlier version leaves one, at the next
		// start.
		_, err = db.ExecContext(ctx, `INSERT INTO audit_logs (id, org_id, app, actor_type, actor_id, action, resource_type,
			resource_id, correlation_id, details, created_at) VALUES ('aud_left', $1, 'pay', 'key', 'key_1', 'left', 'order',
			'ord_1', 'c', '{}', $2)`, org, time.Now().Add(-time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AppendAudit(ctx, auditRecord(org, "after", time.Now())); err != nil {
			t.Fatal(err)
		}
		want := "[left after]"
		if s.Dialect() == migrations.SQLite {
			if err := s.Migrate(ctx, nil); err != nil {
				t.Fatal(err)
			}
			want = "[after left]"
		}
		rows, err = s.AuditChain(ctx, org, 4, 10, 10)
		got = nil
		for _, r := range rows {
			got = append(got, r.Action)
		}
		if err != nil || fmt.Sprint(got) != want {
			t.Fatalf("after the next append: %v %v, want %s", got, err, want)
		}
		if res := verifyStoredChain(t, s, org); res.Broken != nil || res.Entries != 6 {
			t.Fatalf("verification at the end: %+v %v", res, res.Broken)
		}
	})
}

// A window's end is the first record written at or after it; windows that meet make runs
// that meet.
func TestAuditSeqFrom(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		for i := range 5 {
			if err := s.AppendAudit(ctx, auditRecord(org, "a", base.Add(time.Duration(i)*time.Minute))); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			at   time.Time
			want int64
		}{{base.Add(-time.Hour), 1}, {base, 1}, {base.Add(time.Millisecond), 2}, {base.Add(2 * time.Minute), 3},
			{base.Add(4*time.Minute + time.Second), 0}} {
			got, err := s.AuditSeqFrom(ctx, org, c.at)
			if err != nil || got != c.want {
				t.Errorf("AuditSeqFrom(%v) = %d, %v; want %d", c.at, got, err, c.want)
			}
		}
	})
}

// Records imported in bulk take their places after the records appended before them, in
// the order given, and the chain goes on from them.
func TestImportedRecordsContinueTheChain(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		org := mustOrg(t, s)
		now := time.Now()
		if err := s.AppendAudit(ctx, auditRecord(org, "before", now)); err != nil {
			t.Fatal(err)
		}
		batch := make([]store.AuditLog, 1200) // more than one insert statement's worth
		for i := range batch {
			batch[i] = *auditRecord("", fmt.Sprintf("imported.%d", i), now.Add(time.Duration(i)*time.Millisecond))
		}
		if err := s.ImportAudit(ctx, org, batch); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendAudit(ctx, auditRecord(org, "after", now.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		res := verifyStoredChain(t, s, org)
		if res.Broken != nil || res.Entries != 1202 || res.Head.Seq != 1202 {
			t.Fatalf("the chain: %+v %v", res, res.Broken)
		}
		rows, err := s.AuditChain(ctx, org, 1, 3, 2)
		if err != nil || len(rows) != 2 || rows[0].Action != "imported.0" || rows[1].Action != "imported.1" {
			t.Fatalf("the first imported records: %+v %v", rows, err)
		}
	})
}
