package devevm

import (
	"context"
	"math/big"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/opentreasury/treasury/internal/chain/evm"
)

// laggingHead is a node whose receipt for a transaction mined in block 7 is readable
// while its head is still block 6, for the first reads of the head.
type laggingHead struct {
	evm.Client
	mu        sync.Mutex
	headReads int
	lagFor    int
}

func (n *laggingHead) TransactionReceipt(_ context.Context, h common.Hash) (*types.Receipt, error) {
	return &types.Receipt{TxHash: h, BlockNumber: big.NewInt(7), Status: types.ReceiptStatusSuccessful}, nil
}

func (n *laggingHead) HeaderByNumber(_ context.Context, number *big.Int) (*types.Header, error) {
	if number != nil {
		return nil, ethereum.NotFound
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.headReads++
	head := int64(7)
	if n.headReads <= n.lagFor {
		head = 6
	}
	return &types.Header{Number: big.NewInt(head)}, nil
}

// A deployment's transaction counts as mined only once its block is the node's head: the
// next transaction's nonce, and the balances the faucet tops up, are read from "latest".
func TestADeploymentWaitsForTheReceiptsBlockToBeTheHead(t *testing.T) {
	node := &laggingHead{lagFor: 3}
	mined := 0
	d := &Deployer{Client: node, Mine: func() { mined++ }}
	r, err := d.wait(context.Background(), common.HexToHash("0x01"))
	if err != nil {
		t.Fatal(err)
	}
	if r.BlockNumber.Int64() != 7 || node.headReads != 4 {
		t.Fatalf("returned the receipt of block %v after %d reads of the head, want block 7 after 4", r.BlockNumber, node.headReads)
	}
	if mined != 0 {
		t.Fatalf("sealed %d blocks to wait for a head that only had to catch up", mined)
	}
}
