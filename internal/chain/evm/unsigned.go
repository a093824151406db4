package evm

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
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

// Call is one of the calls the adapter's legs make (calls.go), read back from a
// transaction's data by a signer that does not take the readable fields' word for it.
type Call struct {
	// Contract names the kind of contract whose method it is (contracts.Token for ERC-20,
	// contracts.SwapRouter, contracts.Vault, contracts.LendingPool); Method its name.
	Contract, Method string
	// Args are the arguments in order: common.Address, *big.Int, uint16.
	Args []any
	// Beneficiaries are the arguments naming who gets what the call produces: a swap's
	// recipient, a vault's receiver (and a withdrawal's owner), a loan's onBehalfOf, the
	// rewards' to. Every leg the adapter builds names the wallet itself there.
	Beneficiaries []common.Address
}

// knownCalls are the methods the legs call, with the positions of their beneficiaries.
var knownCalls = []struct {
	contract, method string
	beneficiaries    []int
}{
	{contracts.Token, "transfer", nil}, {contracts.Token, "approve", nil},
	{contracts.SwapRouter, "swapExactInput", []int{4}},
	{contracts.Vault, "deposit", []int{1}}, {contracts.Vault, "withdraw", []int{1, 2}}, {contracts.Vault, "claimRewards", []int{0}},
	{contracts.LendingPool, "borrow", []int{4}}, {contracts.LendingPool, "repay", []int{3}},
	{contracts.BatchTransfer, batchToken, nil}, {contracts.BatchTransfer, batchNative, nil},
}

// ErrUnknownCall: the data calls no method the adapter's legs call.
var ErrUnknownCall = errors.New("evm: the call is none the legs make")

// DecodeCall reads a transaction's data as one of the legs' calls. Data that calls another
// method, or that is not exactly that method's encoding (short, or with bytes after its
// arguments), is an error.
func DecodeCall(data []byte) (Call, error) {
	if len(data) < 4 {
		return Call{}, ErrUnknownCall
	}
	for _, k := range knownCalls {
		m := contracts.ABI(k.contract).Methods[k.method]
		if !bytes.Equal(m.ID, data[:4]) {
			continue
		}
		args, err := m.Inputs.Unpack(data[4:])
		if err != nil {
			return Call{}, fmt.Errorf("evm: the %s call does not decode: %w", k.method, err)
		}
		if again, err := m.Inputs.Pack(args...); err != nil || !bytes.Equal(again, data[4:]) {
			return Call{}, fmt.Errorf("evm: the %s call is not exactly its arguments' encoding", k.method)
		}
		c := Call{Contract: k.contract, Method: k.method, Args: args}
		for _, i := range k.beneficiaries {
			c.Beneficiaries = append(c.Beneficiaries, args[i].(common.Address))
		}
		return c, nil
	}
	return Call{}, ErrUnknownCall
}

// CheckIntent reports whether a decoded transaction does what the leg's intent says
// (chain.Intent, from Describe): a native transfer pays To the Amount and calls nothing;
// a call goes to Contract, is Method, and moves Amount to or for To.
func CheckIntent(tx *types.Transaction, in chain.Intent) error {
	if tx.To() == nil {
		return errors.New("the transaction creates a contract")
	}
	amount, ok := new(big.Int).SetString(in.Amount, 10)
	if !ok {
		return fmt.Errorf("the intent's amount %q is not a number of base units", in.Amount)
	}
	same := func(what string, got common.Address, want string) error {
		if !common.IsHexAddress(want) || got != common.HexToAddress(want) {
			return fmt.Errorf("the transaction's %s is %s, the intent's %s", what, got.Hex(), want)
		}
		return nil
	}
	equal := func(what string, got *big.Int) error {
		if got.Cmp(amount) != 0 {
			return fmt.Errorf("the transaction's %s is %s, the intent's amount %s", what, got, amount)
		}
		return nil
	}
	if in.Contract == "" {
		if len(tx.Data()) != 0 {
			return errors.New("the transaction calls a contract; the intent is a plain transfer")
		}
		return errors.Join(same("recipient", *tx.To(), in.To), equal("value", tx.Value()))
	}
	if err := same("contract", *tx.To(), in.Contract); err != nil {
		return err
	}
	c, err := DecodeCall(tx.Data())
	if err != nil {
		return err
	}
	if c.Method != in.Method {
		return fmt.Errorf("the transaction calls %s, the intent %s", c.Method, in.Method)
	}
	addr := func(i int) common.Address { return c.Args[i].(common.Address) }
	num := func(i int) *big.Int { return c.Args[i].(*big.Int) }
	switch c.Method {
	case "transfer":
		return errors.Join(same("recipient", addr(0), in.To), equal("amount", num(1)))
	case "approve":
		return errors.Join(same("spender", addr(0), in.To), equal("allowance", num(1)))
	case "swapExactInput":
		return errors.Join(same("recipient", addr(4), in.To), equal("amount in", num(2)))
	case "deposit":
		return errors.Join(same("receiver", addr(1), in.To), equal("assets", num(0)))
	case "withdraw":
		return errors.Join(same("receiver", addr(1), in.To), same("owner", addr(2), in.To), equal("assets", num(0)))
	case "claimRewards":
		return same("rewards' recipient", addr(0), in.To)
	case "borrow":
		return errors.Join(same("borrower", addr(4), in.To), equal("amount", num(1)))
	case "repay":
		return errors.Join(same("borrower", addr(3), in.To), equal("amount", num(1)))
	case batchToken, batchNative:
		var err error
		if c.Method == batchToken {
			err = same("token", addr(0), in.Token)
		}
		return errors.Join(err, checkBatchIntent(c, tx.Value(), in))
	}
	return fmt.Errorf("no intent check for %s", c.Method)
}
