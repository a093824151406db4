package prices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/store"
)

// Result counts what one refresh did: sources read, readings kept (a reading no newer
// than the kept one is not), sources that failed, prices deleted because no source names
// their asset any more.
type Result struct {
	Read    int
	Kept    int
	Failed  int
	Deleted int64
}

// Feeds reads a price feed on a chain (chain.Router does, through the chain's adapter).
type Feeds interface {
	LatestRound(ctx context.Context, chainName, feed string) (chain.PriceRound, error)
}

// Store is what the price refresh needs of the store (*store.Store).
type Store interface {
	RecordPrice(ctx context.Context, p *store.Price) (bool, error)
	DeletePricesExcept(ctx context.Context, assets []string) (int64, error)
}

// Refresher reads every source and keeps the readings: the price refresh's work, which
// the worker's schedule runs and the dev seed runs once with the seeded prices.
type Refresher struct {
	Store   Store
	Feeds   Feeds
	Sources []Source
	Log     *slog.Logger
	Now     func() time.Time

	warnOnce sync.Once
}

// RefreshPrices reads every source and keeps each reading that is newer than the kept one
// (a retry, or a slow read, never moves a price back). A source that fails keeps its last
// price, which goes stale on its own clock; the activity fails only when every source
// failed. The prices of assets no source names are deleted, so that an asset dropped from
// the configuration has no price rather than its last one forever. With no source at all
// nothing is read or deleted (the prices are whatever was written by hand).
func (p *Refresher) Refresh(ctx context.Context) (Result, error) {
	var res Result
	if len(p.Sources) == 0 {
		p.warnOnce.Do(func() {
			p.Log.Warn("no price sources: orders are refused price_unavailable unless prices are set by other means (see docs/deployment.md, Prices)")
		})
		return res, nil
	}
	var errs []error
	named := make([]string, 0, len(p.Sources))
	for _, src := range p.Sources {
		named = append(named, src.Asset)
		reading, err := p.read(ctx, src)
		if err == nil {
			var kept bool
			kept, err = p.Store.RecordPrice(ctx, reading)
			if kept {
				res.Kept++
			}
		}
		if err != nil {
			res.Failed++
			errs = append(errs, fmt.Errorf("%s from %s: %w", src.Asset, src.Name(), err))
			p.Log.Warn("price source failed: its last price stays until it goes stale",
				"asset", src.Asset, "source", src.Name(), "error", err.Error())
			continue
		}
		res.Read++
		if reading.Stale(p.now()) {
			p.Log.Warn("price is stale: its feed has not updated within twice its heartbeat",
				"asset", src.Asset, "source", src.Name(), "updatedAt", reading.UpdatedAt)
		}
	}
	if res.Read == 0 {
		return res, errors.Join(errs...)
	}
	deleted, err := p.Store.DeletePricesExcept(ctx, named)
	res.Deleted = deleted
	return res, err
}

// read takes one reading of a source.
func (p *Refresher) read(ctx context.Context, src Source) (*store.Price, error) {
	now := p.now()
	if src.Fixed != nil {
		return &store.Price{Asset: src.Asset, USDPrice: *src.Fixed, UpdatedAt: now, Source: src.Name(), ReadAt: &now}, nil
	}
	round, err := p.Feeds.LatestRound(ctx, src.Chain, src.Feed)
	if err != nil {
		return nil, err
	}
	switch {
	case !round.Answer.IsPositive():
		return nil, fmt.Errorf("the feed answered %s, not a price", round.Answer)
	case round.UpdatedAt.Unix() <= 0:
		return nil, errors.New("the feed's round is incomplete (no updatedAt)")
	}
	return &store.Price{Asset: src.Asset, USDPrice: round.Answer, UpdatedAt: round.UpdatedAt, Source: src.Name(),
		Round: round.Round, ReadAt: &now, StaleAfter: src.StaleAfter(round.UpdatedAt)}, nil
}

func (p *Refresher) now() time.Time {
	if p.Now != nil {
		return p.Now().UTC()
	}
	return time.Now().UTC()
}
