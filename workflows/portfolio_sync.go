// Package workflows holds the deterministic Temporal workflow code. It does no I/O: every
// side effect is an activity, called by the names declared here.
package workflows

import (
	"context"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// TaskQueue is the queue the treasury worker polls.
const TaskQueue = "treasury"

// Names under which workflows and activities are registered.
const (
	PortfolioSyncWorkflow      = "PortfolioSync"
	ListWalletRefsActivity     = "ListWalletRefs"
	SyncWalletBalancesActivity = "SyncWalletBalances"
)

// PortfolioSyncScheduleID is the Temporal Schedule that runs the sync.
const PortfolioSyncScheduleID = "portfolio-sync"

// WalletRef identifies a wallet to sync.
type WalletRef struct {
	ID      string
	Chain   string
	Address string
}

// ListWalletRefsInput pages through wallets by id.
type ListWalletRefsInput struct {
	After string
	Limit int
}

// SyncWalletBalancesInput is one batch of wallets to read from the chain.
type SyncWalletBalancesInput struct {
	Wallets []WalletRef
}

// SyncWalletBalancesResult counts what a batch did.
type SyncWalletBalancesResult struct {
	Synced int
	Failed int
}

// PortfolioSyncInput lets a run resume after a wallet id (continue-as-new) and set its page size.
type PortfolioSyncInput struct {
	After    string
	PageSize int
}

// PortfolioSyncResult counts the wallets synced and those whose chain read failed.
type PortfolioSyncResult struct {
	Synced int
	Failed int
}

// pagesPerRun bounds one run's history; a longer sync continues as new.
const pagesPerRun = 100

// PortfolioSync refreshes every wallet's balances from its chain adapter, a page of
// wallets per activity. A Temporal Schedule runs it; one wallet's failure does not stop
// the others, and the next run retries it.
func PortfolioSync(ctx workflow.Context, in PortfolioSyncInput) (PortfolioSyncResult, error) {
	if in.PageSize <= 0 {
		in.PageSize = 100
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		// The batch heartbeats per wallet; a stuck chain read is retried this soon.
		HeartbeatTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    5,
		},
	})
	var res PortfolioSyncResult
	after := in.After
	for page := 0; ; page++ {
		if page == pagesPerRun {
			return res, workflow.NewContinueAsNewError(ctx, PortfolioSyncWorkflow,
				PortfolioSyncInput{After: after, PageSize: in.PageSize})
		}
		var refs []WalletRef
		err := workflow.ExecuteActivity(ctx, ListWalletRefsActivity, ListWalletRefsInput{After: after, Limit: in.PageSize}).Get(ctx, &refs)
		if err != nil {
			return res, err
		}
		if len(refs) == 0 {
			break
		}
		var batch SyncWalletBalancesResult
		if err := workflow.ExecuteActivity(ctx, SyncWalletBalancesActivity, SyncWalletBalancesInput{Wallets: refs}).Get(ctx, &batch); err != nil {
			return res, err
		}
		res.Synced += batch.Synced
		res.Failed += batch.Failed
		after = refs[len(refs)-1].ID
		if len(refs) < in.PageSize {
			break
		}
	}
	workflow.GetLogger(ctx).Info("portfolio sync done", "synced", res.Synced, "failed", res.Failed)
	return res, nil
}

// WalletSyncWorkflow reads one wallet's balances: the first sync of a wallet just
// registered, so that its portfolio does not wait for the schedule.
const WalletSyncWorkflow = "WalletSync"

// WalletSync syncs one wallet, as a page of the schedule's sync does.
func WalletSync(ctx workflow.Context, ref WalletRef) (SyncWalletBalancesResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 30 * time.Second, MaximumAttempts: 5},
	})
	var res SyncWalletBalancesResult
	err := workflow.ExecuteActivity(ctx, SyncWalletBalancesActivity, SyncWalletBalancesInput{Wallets: []WalletRef{ref}}).Get(ctx, &res)
	return res, err
}

// SyncWallet starts the first sync of a registered wallet (once per wallet).
func (c Client) SyncWallet(ctx context.Context, ref WalletRef) error {
	return c.startOnce(ctx, "wallet-sync-"+ref.ID, WalletSyncWorkflow, ref)
}
