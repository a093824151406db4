// Command auditverify measures the background verification of an organisation's audit
// chain at a size no request could check: it imports a chain of -n entries (1,000,000 by
// default) into a fresh store, then verifies it the way the AuditVerification workflow
// does, page after page of Audit.VerifyAuditPage, and prints the entries verified per
// second beside the same run's reference: reading the same pages without checking them
// (what the store alone costs). On SQLite and on PostgreSQL (a database made on the local
// server for the run, dropped after).
//
//	go run ./dev/bench/auditverify
//	go run ./dev/bench/auditverify -store postgres -n 100000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/opentreasury/treasury/activities"
	"github.com/opentreasury/treasury/dev/bench/devbundle"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

func main() {
	which := flag.String("store", "both", "sqlite, postgres or both")
	n := flag.Int("n", 1_000_000, "entries in the chain")
	page := flag.Int("page", activities.AuditPageSize, "entries a page checks")
	server := flag.String("database-url", storetest.PostgresURL(), "PostgreSQL server the run makes a database of its own on (and drops after)")
	flag.Parse()
	stores := []string{*which}
	if *which == "both" {
		stores = []string{"sqlite", "postgres"}
	}
	for _, kind := range stores {
		if err := run(kind, *server, *n, *page); err != nil {
			fmt.Fprintln(os.Stderr, kind+":", err)
			os.Exit(1)
		}
	}
}

func run(kind, server string, n, pageSize int) error {
	ctx := context.Background()
	s, name, closeStore, err := devbundle.OpenStore(ctx, kind, server, "treasury_bench_audit")
	if err != nil {
		return err
	}
	defer closeStore()
	org := &store.Organization{ID: ids.New(ids.Organization), Name: "Bench", CreatedAt: time.Now().UTC()}
	if err := s.CreateOrganization(ctx, org); err != nil {
		return err
	}
	began := time.Now()
	if err := importChain(ctx, s, org.ID, n); err != nil {
		return err
	}
	imported := time.Since(began)
	head, err := s.AuditHead(ctx, org.ID)
	if err != nil {
		return err
	}

	// The reference: the same pages read, nothing checked.
	began = time.Now()
	for after := int64(0); after < head.Seq; {
		rows, err := s.AuditChain(ctx, org.ID, after, head.Seq, pageSize)
		if err != nil || len(rows) == 0 {
			return fmt.Errorf("read after seq %d: %d rows, %v", after, len(rows), err)
		}
		after = rows[len(rows)-1].Seq
	}
	read := time.Since(began)

	now := time.Now().UTC()
	v := &store.AuditVerification{ID: ids.New(ids.AuditVerification), OrgID: org.ID, Status: store.AuditVerificationRunning,
		HeadSeq: head.Seq, HeadHash: head.Hash, Creator: store.Creator{CreatedBy: "bench"}, CreatedAt: now, UpdatedAt: now}
	if err := s.CreateAuditVerification(ctx, v); err != nil {
		return err
	}
	acts := &activities.Audit{Store: s, PageSize: pageSize}
	began = time.Now()
	pages := 0
	for p := (workflows.AuditVerificationProgress{}); !p.Done; pages++ {
		if p, err = acts.VerifyAuditPage(ctx, workflows.AuditVerificationInput{VerificationID: v.ID}); err != nil {
			return err
		}
	}
	verified := time.Since(began)
	got, err := s.AuditVerificationOf(ctx, org.ID, v.ID)
	if err != nil {
		return err
	}
	if got.Status != store.AuditVerificationIntact || got.Entries != head.Seq {
		return fmt.Errorf("the verification ended %s after %d entries, want intact after %d", got.Status, got.Entries, head.Seq)
	}
	rate := float64(head.Seq) / verified.Seconds()
	readRate := float64(head.Seq) / read.Seconds()
	fmt.Printf("%s: %d entries (imported in %v), %d pages of %d\n", name, head.Seq, imported.Round(time.Millisecond), pages, pageSize)
	fmt.Printf("  verified in the background: %.0f entries/s (%v)\n", rate, verified.Round(time.Millisecond))
	fmt.Printf("  the same pages read, unchecked: %.0f entries/s (%v)\n", readRate, read.Round(time.Millisecond))
	fmt.Printf("  verifying / reading: %.2f of the reading rate\n", rate/readRate)
	devbundle.Summarize(fmt.Sprintf("audit chain verified in the background, %d entries, %s", head.Seq, name),
		fmt.Sprintf("%.0f entries/s", rate), fmt.Sprintf("%.0f entries/s read unchecked", readRate),
		fmt.Sprintf("%.2f", rate/readRate), "—", "")
	return nil
}

// importChain writes n records of an organisation's everyday shape (orders made and
// approved, keys, policy changes), 50,000 at a time.
func importChain(ctx context.Context, s *store.Store, orgID string, n int) error {
	actions := []string{"payment.created", "payment.submitted", "approval.approve", "api_key.created", "policy.published"}
	at := time.Now().UTC().Add(-time.Duration(n) * time.Second)
	for done := 0; done < n; {
		batch := make([]store.AuditLog, min(50_000, n-done))
		for i := range batch {
			k := done + i
			details, _ := json.Marshal(map[string]any{"amount": fmt.Sprintf("%d.%02d", k%5000, k%100), "asset": "USDC",
				"destination": map[string]string{"address": "0x1111111111111111111111111111111111111111"}})
			batch[i] = store.AuditLog{ID: ids.New(ids.AuditLog), App: "pay", ActorType: "key", ActorID: "key_bench",
				Action: actions[k%len(actions)], ResourceType: "order", ResourceID: fmt.Sprintf("ord_%032d", k),
				CorrelationID: fmt.Sprintf("bench-%d", k), Details: string(details), CreatedAt: at.Add(time.Duration(k) * time.Second)}
		}
		if err := s.ImportAudit(ctx, orgID, batch); err != nil {
			return err
		}
		done += len(batch)
	}
	return nil
}
