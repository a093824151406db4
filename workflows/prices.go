package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names of the price refresh, its activity and its schedule.
const (
	PriceRefreshWorkflow   = "PriceRefresh"
	RefreshPricesActivity  = "RefreshPrices"
	PriceRefreshScheduleID = "price-refresh"
)

// RefreshPricesResult counts what one refresh did: sources read, readings kept (a reading
// no newer than the kept one is not), sources that failed, prices deleted because no
// source names their asset any more.
type RefreshPricesResult struct {
	Read    int
	Kept    int
	Failed  int
	Deleted int64
}

// PriceRefresh reads every configured price source once. A Temporal Schedule runs it every
// PRICE_REFRESH_INTERVAL; a run that fails leaves the kept prices to go stale on their own
// clocks, so the next run is the retry and this one tries only briefly.
func PriceRefresh(ctx workflow.Context) (RefreshPricesResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	var res RefreshPricesResult
	err := workflow.ExecuteActivity(ctx, RefreshPricesActivity).Get(ctx, &res)
	return res, err
}
