package activities

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/internal/store/storetest"
	"github.com/opentreasury/treasury/workflows"
)

// runMaintenance runs every maintenance activity, as the hourly workflow does, and returns
// what each deleted by table.
func runMaintenance(ctx context.Context, m *Maintenance) (map[string]int64, error) {
	deleted := map[string]int64{}
	for table, run := range map[string]func(context.Context) (int64, error){
		store.ExpiringIdempotencyRecords.Table: m.DeleteExpiredIdempotencyKeys,
		store.ExpiringEvents.Table:             m.DeleteExpiredEvents,
		store.ExpiringOAuthTokens.Table:        m.DeleteExpiredOAuthTokens,
		store.ExpiringRequestLogs.Table:        m.DeleteExpiredRequestLogs,
		store.ExpiringSessions.Table:           m.DeleteExpiredSessions,
		store.ExpiringWebhookDeliveries.Table:  m.DeleteExpiredWebhookDeliveries,
	} {
		n, err := run(ctx)
		if err != nil {
			return nil, err
		}
		deleted[table] = n
	}
	return deleted, nil
}

// TestMaintenanceKeepsTablesBounded is a soak on a compressed clock: a day of steady
// traffic, an hour at a time, with maintenance run after each hour as the schedule runs
// it. Once a table's retention has passed, its rows stop growing: its count after twice
// its retention is its count after three times, give or take one hour's inflow. What
// maintenance must never delete (a delivery still pending, however old) stays.
func TestMaintenanceKeepsTablesBounded(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		clock := start
		// Small batches, so that every run deletes in several.
		retention := Retention{Events: 8 * time.Hour, Webhooks: 6 * time.Hour, RequestLogs: 4 * time.Hour,
			OAuthTokens: 2 * time.Hour, Batch: 7}
		m := &Maintenance{Store: s, Retention: retention, Now: func() time.Time { return clock }}
		traffic := &storetest.Traffic{Store: s, OrdersPerHour: 6, RequestLogsPerHour: 20, TokensPerHour: 4,
			IdempotencyRetention: 5 * time.Hour, TokenTTL: 15 * time.Minute}
		if err := traffic.Setup(ctx, start); err != nil {
			t.Fatal(err)
		}
		pending := stuckDelivery(t, s, start)

		// How long each table's rows stay once written.
		window := map[string]time.Duration{
			"events": retention.Events, "webhook_deliveries": retention.Webhooks, "webhook_attempts": retention.Webhooks,
			"request_logs": retention.RequestLogs, "idempotency_records": traffic.IdempotencyRetention,
			"oauth_tokens": traffic.TokenTTL + retention.OAuthTokens,
		}
		const hours = 24
		counts := make([]map[string]int64, hours+1)
		deleted := map[string]int64{}
		for h := range hours {
			if err := traffic.Hour(ctx, start.Add(time.Duration(h)*time.Hour)); err != nil {
				t.Fatal(err)
			}
			clock = start.Add(time.Duration(h+1) * time.Hour)
			ran, err := runMaintenance(ctx, m)
			if err != nil {
				t.Fatalf("hour %d: %v", h+1, err)
			}
			for table, n := range ran {
				deleted[table] += n
			}
			if counts[h+1], err = s.RowCounts(ctx); err != nil {
				t.Fatal(err)
			}
		}

		for table, keep := range window {
			inflow := traffic.Written[table].Rows / hours
			twice, thrice := int(2*keep.Hours()), int(3*keep.Hours())
			a, b := counts[twice][table], counts[thrice][table]
			t.Logf("%-20s %4d rows written an hour, kept %v: %4d rows after %2d h, %4d after %2d h, %5d written in all",
				table, inflow, keep, a, twice, b, thrice, traffic.Written[table].Rows)
			if inflow == 0 {
				t.Errorf("%s: the traffic wrote nothing", table)
			}
			if d := a - b; d > inflow || -d > inflow {
				t.Errorf("%s has not levelled off: %d rows after %d h, %d after %d h (an hour's inflow is %d)", table, a, twice, b, thrice, inflow)
			}
			// A row may outlive its window by up to an hour: the schedule runs hourly.
			if most := (int64(keep/time.Hour) + 2) * inflow; b > most {
				t.Errorf("%s keeps %d rows, more than its window's %d", table, b, most)
			}
		}
		for _, kind := range []store.Expiring{store.ExpiringEvents, store.ExpiringWebhookDeliveries, store.ExpiringRequestLogs,
			store.ExpiringIdempotencyRecords, store.ExpiringOAuthTokens} {
			if deleted[kind.Table] == 0 {
				t.Errorf("nothing deleted from %s", kind.Table)
			}
		}
		if _, err := s.WebhookDelivery(ctx, pending.ConfigID, pending.ID); err != nil {
			t.Fatalf("the pending delivery of %v is gone: %v", pending.CreatedAt, err)
		}
	})
}

// stuckDelivery is a delivery written long before at and due long after it: pending
// throughout the soak.
func stuckDelivery(t *testing.T, s *store.Store, at time.Time) *store.WebhookDelivery {
	t.Helper()
	ctx := context.Background()
	org := ids.New(ids.Organization)
	if err := s.CreateOrganization(ctx, &store.Organization{ID: org, Name: "Stuck", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	c := &store.WebhookConfig{ID: ids.New(ids.WebhookConfig), OrgID: org, App: "pay", URL: "https://example.com/hook",
		Events: "*", Enabled: true, Secret: "sealed", CreatedAt: at, UpdatedAt: at}
	if err := s.CreateWebhookConfig(ctx, c); err != nil {
		t.Fatal(err)
	}
	due := at.Add(365 * 24 * time.Hour)
	d := &store.WebhookDelivery{ID: ids.New(ids.WebhookDelivery), MessageID: ids.New(ids.WebhookMessage), ConfigID: c.ID,
		EventID: ids.New(ids.Event), Event: "Order.Created", Payload: "{}", Status: store.DeliveryPending, NextAttemptAt: &due,
		CreatedAt: at.Add(-90 * 24 * time.Hour)}
	if err := s.CreateWebhookDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// Run by the workflow, a delete heartbeats after every batch with the rows deleted so far,
// and the run reports what each activity deleted.
func TestMaintenanceHeartbeatsAfterEachBatch(t *testing.T) {
	s := storetest.NewSQLite(t)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var rows []store.RequestLog
	for range 5 {
		rows = append(rows, store.RequestLog{ID: ids.New("req"), OrgID: "org_1", App: "pay", At: now.Add(-48 * time.Hour)})
	}
	if err := s.AppendRequestLogs(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	env := (&testsuite.WorkflowTestSuite{}).NewTestWorkflowEnvironment()
	var beats []int64
	env.SetOnActivityHeartbeatListener(func(info *activity.Info, details converter.EncodedValues) {
		var n int64
		if err := details.Get(&n); err != nil {
			t.Error(err)
		}
		if info.ActivityType.Name == workflows.DeleteExpiredRequestLogsActivity {
			beats = append(beats, n)
		}
	})
	m := &Maintenance{Store: s, Retention: Retention{Events: Forever, Webhooks: Forever, RequestLogs: 24 * time.Hour, Batch: 2},
		Now: func() time.Time { return now }}
	env.RegisterWorkflowWithOptions(workflows.Maintenance, workflow.RegisterOptions{Name: workflows.MaintenanceWorkflow})
	env.RegisterActivity(m)
	env.ExecuteWorkflow(workflows.MaintenanceWorkflow)
	var res workflows.MaintenanceResult
	if err := env.GetWorkflowResult(&res); err != nil || res.RequestLogsDeleted != 5 {
		t.Fatalf("result %+v (%v), want 5 request logs deleted", res, err)
	}
	// The SDK passes the first heartbeat on and throttles those that follow it closely.
	if len(beats) == 0 || beats[0] != 2 {
		t.Fatalf("heartbeats %v, want the first after the first batch of 2", beats)
	}
}

// Keeping a kind forever runs no delete at all.
func TestMaintenanceKeepsForever(t *testing.T) {
	s := storetest.NewSQLite(t)
	old := store.RequestLog{ID: ids.New("req"), OrgID: "org_1", App: "pay", At: time.Unix(0, 0)}
	if err := s.AppendRequestLogs(context.Background(), []store.RequestLog{old}); err != nil {
		t.Fatal(err)
	}
	m := &Maintenance{Store: s, Retention: Retention{RequestLogs: Forever, Batch: 10}}
	if n, err := m.DeleteExpiredRequestLogs(context.Background()); err != nil || n != 0 {
		t.Fatalf("deleted %d (%v) of rows kept forever", n, err)
	}
}

// A delete that runs out of time stops short of its activity's timeout and reports what it
// deleted, without failing: the next hourly run goes on from there.
func TestMaintenanceStopsShortOfItsTimeout(t *testing.T) {
	s := storetest.NewSQLite(t)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const total = 10000
	rows := make([]store.RequestLog, total)
	for i := range rows {
		rows[i] = store.RequestLog{ID: ids.New("req"), OrgID: "org_1", App: "pay", At: now.Add(-48 * time.Hour)}
	}
	if err := s.AppendRequestLogs(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	// A row a batch: far more batches than fit in the 100 ms the timeout leaves.
	m := &Maintenance{Store: s, Retention: Retention{RequestLogs: time.Hour, Batch: 1}, Now: func() time.Time { return now }}
	shortRun := func(ctx workflow.Context) (int64, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: deadlineMargin + 100*time.Millisecond})
		var n int64
		err := workflow.ExecuteActivity(ctx, workflows.DeleteExpiredRequestLogsActivity).Get(ctx, &n)
		return n, err
	}
	env := (&testsuite.WorkflowTestSuite{}).NewTestWorkflowEnvironment()
	env.RegisterWorkflow(shortRun)
	env.RegisterActivity(m)
	env.ExecuteWorkflow(shortRun)
	var first int64
	if err := env.GetWorkflowResult(&first); err != nil || first >= total {
		t.Fatalf("the short run deleted %d of %d (%v): want it stopped in time, without an error", first, total, err)
	}
	m.Retention.Batch = 1000
	rest, err := m.DeleteExpiredRequestLogs(context.Background())
	if err != nil || first+rest != total {
		t.Fatalf("the next run deleted %d (%v) after the first's %d, of %d", rest, err, first, total)
	}
	t.Logf("the short run deleted %d, the next the other %d", first, rest)
}

// Expired sign-in links and wallet challenges go with expired sessions; live ones stay.
func TestMaintenanceDeletesExpiredLinksAndChallenges(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
		org := &store.Organization{ID: ids.New(ids.Organization), Name: "o", CreatedAt: now}
		if err := s.CreateOrganization(ctx, org); err != nil {
			t.Fatal(err)
		}
		for _, expires := range []time.Time{now.Add(-time.Hour), now.Add(time.Hour)} {
			u := &store.User{ID: ids.New(ids.User), OrgID: org.ID, Email: ids.New("e") + "@example.com", Role: auth.RoleMember, CreatedAt: now}
			if err := s.CreateUser(ctx, u, nil); err != nil {
				t.Fatal(err)
			}
			err := s.CreateWalletChallenge(ctx, &store.WalletChallenge{ID: ids.New(ids.WalletChallenge), OrgID: org.ID, Chain: "ethereum",
				Address: "0x1", Message: "m", CreatedBy: "k", CreatedAt: expires.Add(-time.Minute), ExpiresAt: expires})
			if err == nil {
				err = s.CreateSignInLink(ctx, &store.SignInLink{TokenHash: ids.New("h"), UserID: u.ID, OrgID: org.ID, CreatedBy: "operator",
					CreatedAt: expires.Add(-time.Minute), ExpiresAt: expires})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		m := &Maintenance{Store: s, Retention: Retention{Batch: 100}, Now: func() time.Time { return now }}
		n, err := m.DeleteExpiredSessions(ctx)
		if err != nil || n != 2 {
			t.Fatalf("deleted %d, %v; want the expired link and challenge", n, err)
		}
		counts, err := s.RowCounts(ctx)
		if err != nil || counts["sign_in_links"] != 1 || counts["wallet_challenges"] != 1 {
			t.Fatalf("left %v, %v", counts, err)
		}
	})
}
