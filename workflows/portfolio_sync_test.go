package workflows

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// newSyncEnv is a test environment whose activities are the given functions.
func newSyncEnv(
	list func(context.Context, ListWalletRefsInput) ([]WalletRef, error),
	sync func(context.Context, SyncWalletBalancesInput) (SyncWalletBalancesResult, error),
) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(PortfolioSync, workflow.RegisterOptions{Name: PortfolioSyncWorkflow})
	env.RegisterWorkflowWithOptions(WalletSync, workflow.RegisterOptions{Name: WalletSyncWorkflow})
	env.RegisterActivityWithOptions(list, activity.RegisterOptions{Name: ListWalletRefsActivity})
	env.RegisterActivityWithOptions(sync, activity.RegisterOptions{Name: SyncWalletBalancesActivity})
	return env
}

// fakeWallets serves ListWalletRefs pages over n wallets with sortable ids.
func fakeWallets(n int) func(context.Context, ListWalletRefsInput) ([]WalletRef, error) {
	return func(_ context.Context, in ListWalletRefsInput) ([]WalletRef, error) {
		var out []WalletRef
		for i := 0; i < n && len(out) < in.Limit; i++ {
			id := fmt.Sprintf("wal_%05d", i)
			if id > in.After {
				out = append(out, WalletRef{ID: id, Chain: "ethereum", Address: "0x" + id})
			}
		}
		return out, nil
	}
}

func TestPortfolioSyncPagesThroughEveryWallet(t *testing.T) {
	cases := []struct {
		wallets, pageSize, wantLists, wantBatches int
	}{
		{wallets: 0, pageSize: 100, wantLists: 1, wantBatches: 0},
		{wallets: 7, pageSize: 100, wantLists: 1, wantBatches: 1},
		{wallets: 250, pageSize: 100, wantLists: 3, wantBatches: 3},
		{wallets: 200, pageSize: 100, wantLists: 3, wantBatches: 2},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d wallets", tc.wallets), func(t *testing.T) {
			lists, batches := 0, 0
			seen := map[string]bool{}
			list := fakeWallets(tc.wallets)
			env := newSyncEnv(
				func(ctx context.Context, in ListWalletRefsInput) ([]WalletRef, error) {
					lists++
					return list(ctx, in)
				},
				func(_ context.Context, in SyncWalletBalancesInput) (SyncWalletBalancesResult, error) {
					batches++
					for _, w := range in.Wallets {
						if seen[w.ID] {
							return SyncWalletBalancesResult{}, fmt.Errorf("wallet %s synced twice", w.ID)
						}
						seen[w.ID] = true
					}
					// Pretend the first wallet of every batch failed on its chain.
					return SyncWalletBalancesResult{Synced: len(in.Wallets) - 1, Failed: 1}, nil
				})
			env.ExecuteWorkflow(PortfolioSyncWorkflow, PortfolioSyncInput{PageSize: tc.pageSize})
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow: completed=%v err=%v", env.IsWorkflowCompleted(), env.GetWorkflowError())
			}
			var res PortfolioSyncResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if lists != tc.wantLists || batches != tc.wantBatches || len(seen) != tc.wallets {
				t.Fatalf("lists %d batches %d wallets %d; want %d %d %d", lists, batches, len(seen), tc.wantLists, tc.wantBatches, tc.wallets)
			}
			if res.Synced+res.Failed != tc.wallets || res.Failed != tc.wantBatches {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

func TestPortfolioSyncContinuesAsNewOnLongRuns(t *testing.T) {
	env := newSyncEnv(fakeWallets(pagesPerRun*2+5),
		func(_ context.Context, in SyncWalletBalancesInput) (SyncWalletBalancesResult, error) {
			return SyncWalletBalancesResult{Synced: len(in.Wallets)}, nil
		})
	env.ExecuteWorkflow(PortfolioSyncWorkflow, PortfolioSyncInput{PageSize: 1})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after %d pages, got %v", pagesPerRun, err)
	}
	var next PortfolioSyncInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.After != fmt.Sprintf("wal_%05d", pagesPerRun-1) || next.PageSize != 1 {
		t.Fatalf("continued with %+v", next)
	}
}

func TestPortfolioSyncFailsWhenListingKeepsFailing(t *testing.T) {
	calls := 0
	env := newSyncEnv(
		func(context.Context, ListWalletRefsInput) ([]WalletRef, error) {
			calls++
			return nil, errors.New("database unavailable")
		},
		func(context.Context, SyncWalletBalancesInput) (SyncWalletBalancesResult, error) {
			return SyncWalletBalancesResult{}, nil
		})
	env.ExecuteWorkflow(PortfolioSyncWorkflow, PortfolioSyncInput{})
	if env.GetWorkflowError() == nil {
		t.Fatal("want the workflow to fail once retries are exhausted")
	}
	if calls != 5 {
		t.Fatalf("want 5 attempts (the retry policy), got %d", calls)
	}
}

func TestMaintenanceDeletesExpiredIdempotencyKeys(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Maintenance, workflow.RegisterOptions{Name: MaintenanceWorkflow})
	calls := 0
	env.RegisterActivityWithOptions(func(context.Context) (int64, error) {
		calls++
		if calls == 1 {
			return 0, errors.New("database busy")
		}
		return 7, nil
	}, activity.RegisterOptions{Name: DeleteExpiredIdempotencyKeysActivity})
	env.RegisterActivityWithOptions(func(context.Context) (int64, error) { return 3, nil },
		activity.RegisterOptions{Name: DeleteExpiredEventsActivity})
	env.RegisterActivityWithOptions(func(context.Context) (int64, error) { return 2, nil },
		activity.RegisterOptions{Name: DeleteExpiredOAuthTokensActivity})
	env.RegisterActivityWithOptions(func(context.Context) (int64, error) { return 11, nil },
		activity.RegisterOptions{Name: DeleteExpiredRequestLogsActivity})
	env.RegisterActivityWithOptions(func(context.Context) (int64, error) { return 4, nil },
		activity.RegisterOptions{Name: DeleteExpiredSessionsActivity})
	env.RegisterActivityWithOptions(func(context.Context) (int64, error) { return 9, nil },
		activity.RegisterOptions{Name: DeleteExpiredWebhookDeliveriesActivity})
	env.ExecuteWorkflow(MaintenanceWorkflow)
	var res MaintenanceResult
	if err := env.GetWorkflowResult(&res); err != nil || res.IdempotencyKeysDeleted != 7 || res.EventsDeleted != 3 ||
		res.OAuthTokensDeleted != 2 || res.RequestLogsDeleted != 11 || res.SessionsDeleted != 4 ||
		res.WebhookDeliveriesDeleted != 9 || calls != 2 {
		t.Fatalf("result %+v err %v calls %d", res, err, calls)
	}
}

// A registered wallet's first sync reads that wallet alone, retried when the chain fails.
func TestWalletSyncReadsOneWallet(t *testing.T) {
	calls := 0
	env := newSyncEnv(fakeWallets(0), func(_ context.Context, in SyncWalletBalancesInput) (SyncWalletBalancesResult, error) {
		calls++
		if len(in.Wallets) != 1 || in.Wallets[0].ID != "wal_new" {
			return SyncWalletBalancesResult{}, fmt.Errorf("synced %v", in.Wallets)
		}
		if calls == 1 {
			return SyncWalletBalancesResult{}, errors.New("node unreachable")
		}
		return SyncWalletBalancesResult{Synced: 1}, nil
	})
	env.ExecuteWorkflow(WalletSyncWorkflow, WalletRef{ID: "wal_new", Chain: "ethereum", Address: "0xabc"})
	var res SyncWalletBalancesResult
	if err := env.GetWorkflowError(); err != nil || env.GetWorkflowResult(&res) != nil || res.Synced != 1 || calls != 2 {
		t.Fatalf("wallet sync: %v %+v after %d calls", err, res, calls)
	}
}
