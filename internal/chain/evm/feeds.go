package evm

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
)

// LatestRound reads a Chainlink AggregatorV3 feed: latestRoundData, scaled by the feed's
// own decimals (read each time: a feed's proxy may move to an aggregator of other decimals).
func (c *Chain) LatestRound(ctx context.Context, feed string) (chain.PriceRound, error) {
	if !common.IsHexAddress(feed) {
		return chain.PriceRound{}, fmt.Errorf("evm: %s: feed %q is not an address", c.cfg.Name, feed)
	}
	at := common.HexToAddress(feed)
	aggregator := contracts.ABI(contracts.PriceFeed)
	var decimals uint8
	if err := c.view(ctx, at, aggregator, "decimals", &decimals); err != nil {
		return chain.PriceRound{}, fmt.Errorf("evm: %s: feed %s decimals: %w", c.cfg.Name, at, err)
	}
	var round struct {
		RoundId         *big.Int
		Answer          *big.Int
		StartedAt       *big.Int
		UpdatedAt       *big.Int
		AnsweredInRound *big.Int
	}
	if err := c.view(ctx, at, aggregator, "latestRoundData", &round); err != nil {
		return chain.PriceRound{}, fmt.Errorf("evm: %s: feed %s latestRoundData: %w", c.cfg.Name, at, err)
	}
	if !round.UpdatedAt.IsInt64() {
		return chain.PriceRound{}, fmt.Errorf("evm: %s: feed %s answered an updatedAt out of range", c.cfg.Name, at)
	}
	return chain.PriceRound{
		Round:     round.RoundId.String(),
		Answer:    decimal.NewFromBigInt(round.Answer, -int32(decimals)),
		UpdatedAt: time.Unix(round.UpdatedAt.Int64(), 0).UTC(),
	}, nil
}
