package evm

import (
	"bytes"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
)

func TestUnsignedBytesHashToTheSigningHashAndDecodeBack(t *testing.T) {
	to := common.HexToAddress("0x1111111111111111111111111111111111111111")
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(137), Nonce: 7, GasTipCap: big.NewInt(2_000_000_000),
		GasFeeCap: big.NewInt(90_000_000_000), Gas: 65_000, To: &to, Value: big.NewInt(0), Data: []byte{0xa9, 0x05, 0x9c, 0xbb, 1, 2, 3}})
	raw, err := UnsignedBytes(tx)
	if err != nil {
		t.Fatal(err)
	}
	back, hash, err := DecodeUnsigned(raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := types.LatestSignerForChainID(big.NewInt(137)).Hash(tx); hash != want {
		t.Fatalf("the unsigned bytes hash to %s, the signing hash is %s", hash, want)
	}
	if back.ChainId().Cmp(tx.ChainId()) != 0 || back.Nonce() != 7 || *back.To() != to || back.Gas() != 65_000 ||
		back.GasFeeCap().Cmp(tx.GasFeeCap()) != 0 || back.GasTipCap().Cmp(tx.GasTipCap()) != 0 || !bytes.Equal(back.Data(), tx.Data()) {
		t.Fatalf("decoded %+v, encoded %+v", back, tx)
	}

	for name, bad := range map[string][]byte{
		"empty":          nil,
		"legacy type":    append([]byte{0x01}, raw[1:]...),
		"trailing bytes": append(append([]byte{}, raw...), 0x80),
		"truncated":      raw[:len(raw)-2],
	} {
		if _, _, err := DecodeUnsigned(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestDecodeCallReadsTheLegsCallsAndNothingElse(t *testing.T) {
	wallet := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	other := common.HexToAddress("0x00000000000000000000000000000000000000bb")
	token := common.HexToAddress("0x00000000000000000000000000000000000000cc")
	amount := big.NewInt(1_500_000)
	pack := func(contract, method string, args ...any) []byte {
		data, err := contracts.ABI(contract).Pack(method, args...)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	cases := []struct {
		data          []byte
		method        string
		beneficiaries []common.Address
	}{
		{pack(contracts.Token, "transfer", other, amount), "transfer", nil},
		{pack(contracts.Token, "approve", other, amount), "approve", nil},
		{pack(contracts.SwapRouter, "swapExactInput", token, common.Address{}, amount, big.NewInt(1), wallet), "swapExactInput", []common.Address{wallet}},
		{pack(contracts.Vault, "deposit", amount, wallet), "deposit", []common.Address{wallet}},
		{pack(contracts.Vault, "withdraw", amount, wallet, other), "withdraw", []common.Address{wallet, other}},
		{pack(contracts.Vault, "claimRewards", other), "claimRewards", []common.Address{other}},
		{pack(contracts.LendingPool, "borrow", token, amount, big.NewInt(2), uint16(0), wallet), "borrow", []common.Address{wallet}},
		{pack(contracts.LendingPool, "repay", token, amount, big.NewInt(2), other), "repay", []common.Address{other}},
	}
	for _, tc := range cases {
		c, err := DecodeCall(tc.data)
		if err != nil || c.Method != tc.method || len(c.Beneficiaries) != len(tc.beneficiaries) {
			t.Fatalf("%s: %+v %v", tc.method, c, err)
		}
		for i, b := range tc.beneficiaries {
			if c.Beneficiaries[i] != b {
				t.Errorf("%s: beneficiary %d is %s, want %s", tc.method, i, c.Beneficiaries[i], b)
			}
		}
		if _, err := DecodeCall(append(append([]byte{}, tc.data...), 0)); err == nil {
			t.Errorf("%s with a byte after its arguments decoded", tc.method)
		}
	}
	transfer, _ := DecodeCall(cases[0].data)
	if transfer.Args[0].(common.Address) != other || transfer.Args[1].(*big.Int).Cmp(amount) != 0 {
		t.Fatalf("transfer args %v", transfer.Args)
	}
	if _, err := DecodeCall(pack(contracts.Token, "balanceOf", wallet)); err != ErrUnknownCall {
		t.Fatalf("balanceOf: %v, want ErrUnknownCall", err)
	}
	if _, err := DecodeCall(nil); err != ErrUnknownCall {
		t.Fatalf("no data: %v", err)
	}
}

func TestCheckIntentRefusesATransactionThatDoesSomethingElse(t *testing.T) {
	usdc := common.HexToAddress("0x00000000000000000000000000000000000000c1")
	payee := common.HexToAddress("0x1111111111111111111111111111111111111111")
	data, err := contracts.ABI(contracts.Token).Pack("transfer", payee, big.NewInt(1_500_000))
	if err != nil {
		t.Fatal(err)
	}
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(1), To: &usdc, Value: new(big.Int), Data: data, Gas: 65_000,
		GasFeeCap: big.NewInt(1), GasTipCap: big.NewInt(1)})
	honest := chain.Intent{Leg: "TRANSFER", To: payee.Hex(), Asset: "USDC", Amount: "1500000", Contract: usdc.Hex(), Method: "transfer"}
	if err := CheckIntent(tx, honest); err != nil {
		t.Fatalf("the honest intent: %v", err)
	}
	for name, change := range map[string]func(*chain.Intent){
		"another payee":        func(in *chain.Intent) { in.To = "0x2222222222222222222222222222222222222222" },
		"a smaller amount":     func(in *chain.Intent) { in.Amount = "1000000" },
		"another token":        func(in *chain.Intent) { in.Contract = "0x00000000000000000000000000000000000000c2" },
		"another method":       func(in *chain.Intent) { in.Method = "approve" },
		"a native transfer":    func(in *chain.Intent) { in.Contract, in.Method = "", "" },
		"an amount in decimal": func(in *chain.Intent) { in.Amount = "1.5" },
	} {
		in := honest
		change(&in)
		if err := CheckIntent(tx, in); err == nil {
			t.Errorf("%s: the transaction passed", name)
		}
	}
}
