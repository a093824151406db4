package service_test

import (
	"context"
	"errors"
	. "github.com/opentreasury/treasury/internal/service"
	"testing"
	"time"

	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/store"
)

type unstartableRecovery struct{}

func (unstartableRecovery) StartWebhookRecovery(context.Context, string) error {
	return errors.New("temporal is away")
}

// A recovery whose workflow cannot be started ends failed, saying why, instead of
// showing as running for ever; without Temporal at all none is made.
func TestARecoveryThatCannotStartEndsFailed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	who := f.as(t, f.creds.Keys["pay"].SK)
	now := time.Now()
	c := &store.WebhookConfig{ID: ids.New(ids.WebhookConfig), OrgID: who.OrgID, App: "pay", URL: "https://hooks.example.com/x",
		Events: "*", Enabled: true, Secret: "sealed", CreatedAt: now, UpdatedAt: now}
	if err := f.svc.Store.CreateWebhookConfig(ctx, c); err != nil {
		t.Fatal(err)
	}
	since := now.Add(-time.Hour)
	if _, err := f.svc.RecoverWebhook(ctx, who, c.ID, since, nil); !errors.Is(err, ErrWorkflowsUnavailable) {
		t.Fatalf("without Temporal: %v", err)
	}
	f.svc.Recoveries = unstartableRecovery{}
	if _, err := f.svc.RecoverWebhook(ctx, who, c.ID, since, nil); KindOf(err) != Unavailable {
		t.Fatalf("start: %v, want unavailable", err)
	}
	list, _, err := f.svc.WebhookRecoveries(ctx, who, c.ID, Page{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Status != store.RecoveryFailed || list[0].Error == "" || list[0].CompletedAt == nil {
		t.Fatalf("recoveries %+v (%v), want one failed", list, err)
	}
}
