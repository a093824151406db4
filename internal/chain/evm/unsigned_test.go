package evm

import (
	"bytes"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
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
