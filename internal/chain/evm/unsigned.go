package evm

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"
)

// unsignedDynamicFeeTx is the list an EIP-1559 transaction's signing hash covers, in its
// order: the transaction without its signature.
type unsignedDynamicFeeTx struct {
	ChainID    *big.Int
	Nonce      uint64
	GasTipCap  *big.Int
	GasFeeCap  *big.Int
	Gas        uint64
	To         *common.Address `rlp:"nil"`
	Value      *big.Int
	Data       []byte
	AccessList types.AccessList
}

// UnsignedBytes is an EIP-1559 transaction's unsigned encoding, 0x02 ‖ rlp(chainId,
// nonce, tip, fee cap, gas, to, value, data, access list): the bytes whose Keccak-256 is
// the transaction's signing hash.
func UnsignedBytes(tx *types.Transaction) ([]byte, error) {
	if tx.Type() != types.DynamicFeeTxType {
		return nil, fmt.Errorf("evm: a transaction of type %d, not EIP-1559", tx.Type())
	}
	body, err := rlp.EncodeToBytes(&unsignedDynamicFeeTx{ChainID: tx.ChainId(), Nonce: tx.Nonce(), GasTipCap: tx.GasTipCap(),
		GasFeeCap: tx.GasFeeCap(), Gas: tx.Gas(), To: tx.To(), Value: tx.Value(), Data: tx.Data(), AccessList: tx.AccessList()})
	if err != nil {
		return nil, err
	}
	return append([]byte{types.DynamicFeeTxType}, body...), nil
}

// DecodeUnsigned reads an EIP-1559 transaction from its unsigned encoding and returns it
// with its signing hash, the Keccak-256 of raw. Anything but one complete EIP-1559
// transaction is an error.
func DecodeUnsigned(raw []byte) (*types.Transaction, common.Hash, error) {
	if len(raw) == 0 || raw[0] != types.DynamicFeeTxType {
		return nil, common.Hash{}, errors.New("evm: the unsigned transaction is not of type 2 (EIP-1559)")
	}
	var u unsignedDynamicFeeTx
	if err := rlp.DecodeBytes(raw[1:], &u); err != nil {
		return nil, common.Hash{}, fmt.Errorf("evm: the unsigned transaction does not decode: %w", err)
	}
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: u.ChainID, Nonce: u.Nonce, GasTipCap: u.GasTipCap, GasFeeCap: u.GasFeeCap,
		Gas: u.Gas, To: u.To, Value: u.Value, Data: u.Data, AccessList: u.AccessList})
	return tx, crypto.Keccak256Hash(raw), nil
}
