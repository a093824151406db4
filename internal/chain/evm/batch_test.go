package evm_test

import (
	"context"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/params"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/orders"
)

// TestAFullBatchPartFitsOneTransaction: a part of a batch is as many recipients as one
// transaction can pay at the worst (each a fresh holder of the token), with the adapter's
// gas headroom, under the per-transaction gas cap; paying holders again costs far less.
func TestAFullBatchPartFitsOneTransaction(t *testing.T) {
	key, _ := crypto.GenerateKey()
	from := crypto.PubkeyToAddress(key.PublicKey)
	b := simulated.NewBackend(types.GenesisAlloc{from: {Balance: new(big.Int).Mul(big.NewInt(1e18), big.NewInt(1e6))}})
	defer func() { _ = b.Close() }()
	c, ctx, nonce := b.Client(), context.Background(), uint64(0)
	send := func(to *common.Address, data []byte) *types.Receipt {
		t.Helper()
		head, err := c.HeaderByNumber(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		tx := types.MustSignNewTx(key, types.LatestSignerForChainID(big.NewInt(1337)), &types.DynamicFeeTx{ChainID: big.NewInt(1337),
			Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(1e9)),
			Gas: params.MaxTxGas, To: to, Data: data})
		nonce++
		if err := c.SendTransaction(ctx, tx); err != nil {
			t.Fatal(err)
		}
		b.Commit()
		r, err := bind.WaitMined(ctx, c, tx.Hash())
		if err != nil || r.Status != types.ReceiptStatusSuccessful {
			t.Fatalf("receipt %+v %v", r, err)
		}
		return r
	}
	tokenABI, batchABI := contracts.ABI(contracts.Token), contracts.ABI(contracts.BatchTransfer)
	args, _ := tokenABI.Constructor.Inputs.Pack("USDC (dev)", "USDC", uint8(6))
	token := send(nil, append(contracts.Bytecode(contracts.Token), args...)).ContractAddress
	batch := send(nil, contracts.Bytecode(contracts.BatchTransfer)).ContractAddress
	mint, _ := tokenABI.Pack("mint", from, big.NewInt(1e15))
	send(&token, mint)
	approve, _ := tokenABI.Pack("approve", batch, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))
	send(&token, approve)

	n := orders.DefaultBatchPartSize
	to, amounts := make([]common.Address, n), make([]*big.Int, n)
	for i := range n {
		to[i], amounts[i] = common.BigToAddress(big.NewInt(int64(0xfee0000+i))), big.NewInt(int64(1000+i))
	}
	data, err := batchABI.Pack("batchTransferToken", token, to, amounts)
	if err != nil {
		t.Fatal(err)
	}
	estimate, err := c.EstimateGas(ctx, ethereum.CallMsg{From: from, To: &batch, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if withHeadroom := estimate + estimate*20/100; withHeadroom > params.MaxTxGas {
		t.Fatalf("a part of %d fresh recipients needs %d gas with headroom, over the cap of %d", n, withHeadroom, params.MaxTxGas)
	}
	fresh := send(&batch, data).GasUsed
	again := send(&batch, data).GasUsed
	t.Logf("a part of %d: %d gas to fresh holders (%d each), %d to holders (%d each); cap %d", n, fresh, fresh/uint64(n), again, again/uint64(n), params.MaxTxGas)
	for i, a := range to {
		var held *big.Int
		out, err := c.CallContract(ctx, ethereum.CallMsg{To: &token, Data: must(tokenABI.Pack("balanceOf", a))}, nil)
		if err == nil {
			held = new(big.Int).SetBytes(out)
		}
		if want := new(big.Int).Mul(amounts[i], big.NewInt(2)); held == nil || held.Cmp(want) != 0 {
			t.Fatalf("recipient %d holds %v, want %s", i, held, want)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestABatchIntentMustStateItsTotal: an intent whose recipients are each right but whose
// amount understates their total (which a signer's approval tiers read) is refused.
func TestABatchIntentMustStateItsTotal(t *testing.T) {
	token, batch := common.HexToAddress("0xc1"), common.HexToAddress("0xba")
	to := []common.Address{common.HexToAddress("0x11"), common.HexToAddress("0x22")}
	data := must(contracts.ABI(contracts.BatchTransfer).Pack("batchTransferToken", token, to, []*big.Int{big.NewInt(1_000_000), big.NewInt(2_000_000)}))
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1), Gas: 200_000, To: &batch, Value: new(big.Int), Data: data})
	in := chain.Intent{Leg: "TRANSFER", To: batch.Hex(), Asset: "USDC", Amount: "3000000", Contract: batch.Hex(), Method: "batchTransferToken",
		Token: token.Hex(), Recipients: []chain.IntentPayee{{To: to[0].Hex(), Amount: "1000000"}, {To: to[1].Hex(), Amount: "2000000"}}}
	if err := evm.CheckIntent(tx, in); err != nil {
		t.Fatalf("the honest intent: %v", err)
	}
	in.Amount = "1"
	if err := evm.CheckIntent(tx, in); err == nil || !strings.Contains(err.Error(), "in all") {
		t.Fatalf("an intent understating its total: %v", err)
	}
	in.Amount, in.Token = "3000000", common.HexToAddress("0xc2").Hex()
	if err := evm.CheckIntent(tx, in); err == nil {
		t.Fatal("an intent naming another token passed")
	}
}
