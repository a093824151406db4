package evm

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
)

// The batch contract's methods: a token batch pulls each amount from the wallet with
// transferFrom; a native batch is sent the total as value.
const (
	batchToken  = "batchTransferToken"
	batchNative = "batchTransferNative"
)

// batchContract is the chain's batch contract, or an error saying it has none: a batch
// then fails unsupported_asset, as an asset the configuration lacks does.
func (c *Chain) batchContract() (common.Address, error) {
	if c.cfg.BatchTransfer == nil {
		return common.Address{}, fmt.Errorf("%w: %s has no batch transfer contract configured (batchTransfer)", chain.ErrUnsupportedAsset, c.cfg.Name)
	}
	return *c.cfg.BatchTransfer, nil
}

// batchPayees are a batch part's recipients and amounts in base units, and their total.
func batchPayees(leg chain.Leg, decimals int32) ([]common.Address, []*big.Int, *big.Int, error) {
	to, amounts, total := make([]common.Address, len(leg.Recipients)), make([]*big.Int, len(leg.Recipients)), new(big.Int)
	for i, p := range leg.Recipients {
		if !common.IsHexAddress(p.To) {
			return nil, nil, nil, fmt.Errorf("evm: recipient %d's address %q is not an address", i, p.To)
		}
		units, err := Units(p.Amount, decimals)
		if err != nil {
			return nil, nil, nil, err
		}
		to[i], amounts[i] = common.HexToAddress(p.To), units
		total.Add(total, units)
	}
	return to, amounts, total, nil
}

// batchCall is a batch part's transaction: the batch contract's batchTransferToken
// (token, recipients, amounts), or batchTransferNative (recipients, amounts) with the
// total as value.
func (c *Chain) batchCall(leg chain.Leg, asset Token, isToken bool) (intent, error) {
	contract, err := c.batchContract()
	if err != nil {
		return intent{}, err
	}
	to, amounts, total, err := batchPayees(leg, asset.Decimals)
	if err != nil {
		return intent{}, err
	}
	batchABI := contracts.ABI(contracts.BatchTransfer)
	words := call{Contract: "batch transfer", Args: map[string]string{"recipients": fmt.Sprint(len(to)),
		"total": leg.Amount.String() + " " + leg.Asset}}
	if !isToken {
		words.Method = batchNative
		data, err := batchABI.Pack(batchNative, to, amounts)
		return intent{to: contract, value: total, data: data, call: words}, err
	}
	words.Method, words.Args["token"] = batchToken, asset.Symbol+" (ERC-20) "+asset.Address.Hex()
	data, err := batchABI.Pack(batchToken, asset.Address, to, amounts)
	return intent{to: contract, value: new(big.Int), data: data, call: words}, err
}

// describeBatch is a batch part's intent: the batch contract, its method, each recipient
// with its amount, and their total.
func (c *Chain) describeBatch(leg chain.Leg, in chain.Intent, asset Token, isToken bool) (chain.Intent, error) {
	contract, err := c.batchContract()
	if err != nil {
		return chain.Intent{}, err
	}
	to, amounts, total, err := batchPayees(leg, asset.Decimals)
	if err != nil {
		return chain.Intent{}, err
	}
	in.To, in.Contract, in.Method, in.Amount = contract.Hex(), contract.Hex(), batchNative, total.String()
	if isToken {
		in.Method, in.Token = batchToken, asset.Address.Hex()
	}
	in.Recipients = make([]chain.IntentPayee, len(to))
	for i := range to {
		in.Recipients[i] = chain.IntentPayee{To: to[i].Hex(), Amount: amounts[i].String()}
	}
	return in, nil
}

// checkBatchIntent holds a decoded batch call to its intent: the same method, every
// recipient and amount in the same order, and for a native batch the total as value.
func checkBatchIntent(c Call, value *big.Int, in chain.Intent) error {
	var (
		to      []common.Address
		amounts []*big.Int
	)
	switch c.Method {
	case batchToken:
		to, amounts = c.Args[1].([]common.Address), c.Args[2].([]*big.Int)
		if value.Sign() != 0 {
			return fmt.Errorf("the transaction sends %s of the native asset with a token batch", value)
		}
	case batchNative:
		to, amounts = c.Args[0].([]common.Address), c.Args[1].([]*big.Int)
		if value.String() != in.Amount {
			return fmt.Errorf("the transaction's value is %s, the intent's total %s", value, in.Amount)
		}
	}
	if len(to) != len(in.Recipients) || len(amounts) != len(in.Recipients) {
		return fmt.Errorf("the transaction pays %d recipients (%d amounts), the intent %d", len(to), len(amounts), len(in.Recipients))
	}
	// The intent's amount is what a signer's approval tiers read: it must be the total the
	// transaction moves, not merely beside recipients that are each right.
	total := new(big.Int)
	for _, a := range amounts {
		total.Add(total, a)
	}
	var errs []error
	if total.String() != in.Amount {
		errs = append(errs, fmt.Errorf("the transaction pays %s in all, the intent's amount is %s", total, in.Amount))
	}
	for i, p := range in.Recipients {
		if !common.IsHexAddress(p.To) || to[i] != common.HexToAddress(p.To) {
			errs = append(errs, fmt.Errorf("recipient %d is %s, the intent's %s", i, to[i].Hex(), p.To))
		}
		if amounts[i].String() != p.Amount {
			errs = append(errs, fmt.Errorf("recipient %d gets %s, the intent's %s", i, amounts[i], p.Amount))
		}
	}
	return errors.Join(errs...)
}

// batchMovements checks a batch part's simulated movements against its intent: what
// leaves the wallet is only the batch's asset, to the recipients (a token batch) or to the
// batch contract (a native batch, which forwards it), exactly the total; and each
// recipient receives exactly its amounts, from the wallet or from the batch contract.
func batchMovements(in chain.Intent, asset, wallet common.Address, o Outcome) error {
	contract := common.HexToAddress(in.Contract)
	want := map[common.Address]*big.Int{}
	for _, p := range in.Recipients {
		units, ok := new(big.Int).SetString(p.Amount, 10)
		if !ok {
			return fmt.Errorf("the intent's amount %q is not base units", p.Amount)
		}
		a := common.HexToAddress(p.To)
		if want[a] == nil {
			want[a] = new(big.Int)
		}
		want[a].Add(want[a], units)
	}
	got, spent := map[common.Address]*big.Int{}, new(big.Int)
	for _, m := range o.Movements {
		payer := m.From == wallet || asset == NativeAddress && m.From == contract
		if !payer {
			continue
		}
		if m.Token != asset {
			return fmt.Errorf("%s base units of %s leave %s; the batch pays only %s", m.Amount, assetName(m.Token), m.From.Hex(), assetName(asset))
		}
		if m.From == wallet {
			spent.Add(spent, m.Amount)
			if asset == NativeAddress && m.To == contract {
				continue
			}
		}
		if want[m.To] == nil {
			return fmt.Errorf("%s base units of %s go to %s, who is not among the batch's recipients", m.Amount, assetName(m.Token), m.To.Hex())
		}
		if got[m.To] == nil {
			got[m.To] = new(big.Int)
		}
		got[m.To].Add(got[m.To], m.Amount)
	}
	if spent.String() != in.Amount {
		return fmt.Errorf("%s base units leave the wallet; the batch pays %s", spent, in.Amount)
	}
	for a, units := range want {
		if got[a] == nil || got[a].Cmp(units) != 0 {
			return fmt.Errorf("%s receives %v base units; the batch pays it %s", a.Hex(), got[a], units)
		}
	}
	return nil
}
