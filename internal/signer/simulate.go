package signer

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
)

// NodeTimeout bounds each call to a chain's node: dialling it, and each simulation.
const NodeTimeout = 15 * time.Second

// Node is what the signer asks of its own node: the chain it serves, and simulations.
type Node interface {
	ChainID(ctx context.Context) (*big.Int, error)
	evm.Simulator
}

// Dial connects to a node's JSON-RPC URL.
type Dial func(ctx context.Context, url string) (Node, error)

// DialNode dials a node over HTTP(S) or WebSocket, each HTTP call bounded by NodeTimeout.
func DialNode(ctx context.Context, url string) (Node, error) {
	c, err := rpc.DialOptions(ctx, url, rpc.WithHTTPClient(&http.Client{Timeout: NodeTimeout}))
	if err != nil {
		return nil, err
	}
	return ethclient.NewClient(c), nil
}

// Connect dials the node of every chain whose rule names one (with DialNode when dial is
// nil) and checks that it serves the rule's chain id: a signer simulating on another chain
// would judge nothing.
func (p *Policy) Connect(ctx context.Context, dial Dial) error {
	if dial == nil {
		dial = DialNode
	}
	for name, rule := range p.Chains {
		if rule.RPCURL == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, NodeTimeout)
		node, err := dial(ctx, rule.RPCURL)
		if err == nil {
			id, idErr := node.ChainID(ctx)
			if err = idErr; err == nil && (!id.IsUint64() || id.Uint64() != rule.ChainID) {
				err = fmt.Errorf("the node serves chain id %s, the rule says %d", id, rule.ChainID)
			}
		}
		cancel()
		if err != nil {
			return fmt.Errorf("chains.%s.rpcUrl: %s", name, chain.RedactURL(err))
		}
		rule.node = node
		p.Chains[name] = rule
	}
	return nil
}

// Simulate runs a request's transaction, as Check decoded it (nil on the simulated chain,
// which has no node), on the signer's own node of its chain, if its rule names one, and
// holds what it moves to the intent's leg (evm.CheckMovements): nil when it may sign, a
// refusal when the simulation disagrees, or an error when the node could not answer (the
// request then waits for the next pass). It holds the transaction to its intent itself
// (intentLeg), with or without approvers.
func (p *Policy) Simulate(ctx context.Context, r client.SigningRequest, tx *types.Transaction, walletID, address string) (*Refusal, error) {
	rule := p.Chains[r.Chain]
	if rule.RPCURL == "" || tx == nil {
		return nil, nil
	}
	if rule.node == nil {
		// Fail closed: a rule that names a node signs nothing unsimulated.
		return nil, fmt.Errorf("chains.%s.rpcUrl is not connected", r.Chain)
	}
	leg, f := intentLeg(r, func(leg chain.Intent) error { return evm.CheckIntent(tx, leg) }, walletID, address)
	if f != nil {
		return f, nil
	}
	wallet := common.HexToAddress(address)
	ctx, cancel := context.WithTimeout(ctx, NodeTimeout)
	defer cancel()
	_, outcomes, err := evm.Simulate(ctx, rule.node, []ethereum.CallMsg{{From: wallet, To: tx.To(), Gas: tx.Gas(), Value: tx.Value(), Data: tx.Data()}})
	if err != nil {
		return nil, err
	}
	if err := evm.CheckMovements(tx, leg, wallet, outcomes[0]); err != nil {
		if outcomes[0].Reverted {
			return refusal("simulation_reverted", "on the signer's node: %v", err), nil
		}
		return refusal("balance_mismatch", "on the signer's node: %v", err), nil
	}
	return nil, nil
}

// DefaultRevertGrace is how long, by default, a transaction that reverts on the signer's
// node is asked about again before it is refused: the leg before it (an approve before
// its swap) may have confirmed on the service's node a block before the signer's sees it.
const DefaultRevertGrace = 30 * time.Second

// withinRevertGrace records when the request's transaction first reverted and reports
// whether grace has not passed since. Once it has, the record goes: the request is
// refused, and not asked about again.
func (p *Policy) withinRevertGrace(requestID string, now time.Time, grace time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reverts == nil {
		p.reverts = map[string]time.Time{}
	}
	first, seen := p.reverts[requestID]
	if !seen {
		first = now
		p.reverts[requestID] = now
	}
	if now.Sub(first) < grace {
		return true
	}
	delete(p.reverts, requestID)
	return false
}
