package evm

import (
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"

	"github.com/opentreasury/treasury/internal/chain"
)

// interestRateVariable is Aave v3's variable-rate mode, the one borrow and repay use.
var interestRateVariable = big.NewInt(2)

// intent maps a leg to the call it makes (docs/chains.md has the table):
// TRANSFER a native send or ERC-20 transfer; APPROVE an ERC-20 approve of the swap router;
// SWAP the router's swapExactInput; DEPOSIT, WITHDRAW and CLAIM the ERC-4626 vault's
// deposit, withdraw and claimRewards; DRAW and REPAY the pool's borrow and repay.
func (c *Chain) intent(ctx context.Context, leg chain.Leg, from common.Address) (intent, error) {
	asset, isToken, err := c.cfg.token(leg.Asset)
	if err != nil && leg.Kind != "CLAIM" {
		return intent{}, err
	}
	units := new(big.Int)
	if leg.Kind != "CLAIM" {
		if units, err = Units(leg.Amount, asset.Decimals); err != nil {
			return intent{}, err
		}
	}
	in, err := c.legCall(ctx, leg, from, asset, isToken, units)
	if err == nil && isToken && spends[leg.Kind] {
		in.token, in.tokenUnits = &asset, units
	}
	return in, err
}

// spends are the legs that take the leg's asset from the wallet: an APPROVE only grants
// it, but the SWAP after it spends it, and a trade is better refused before its first leg.
var spends = map[string]bool{"TRANSFER": true, "APPROVE": true, "SWAP": true, "DEPOSIT": true, "REPAY": true}

// legCall is intent's table: the leg's call, given its asset and amount in base units.
func (c *Chain) legCall(ctx context.Context, leg chain.Leg, from common.Address, asset Token, isToken bool, units *big.Int) (intent, error) {
	var err error
	amount := leg.Amount.String() + " " + leg.Asset
	zero := new(big.Int)
	switch leg.Kind {
	case "TRANSFER":
		if len(leg.Recipients) > 0 {
			return c.batchCall(leg, asset, isToken)
		}
		if !common.IsHexAddress(leg.To) {
			return intent{}, fmt.Errorf("evm: the destination %q is not an address", leg.To)
		}
		to := common.HexToAddress(leg.To)
		words := call{Method: "transfer", Args: map[string]string{"to": to.Hex(), "amount": amount}}
		if !isToken {
			words.Contract = "native " + c.cfg.NativeAsset
			return intent{to: to, value: units, call: words}, nil
		}
		words.Contract = asset.Symbol + " (ERC-20)"
		data, err := c.erc20ABI.Pack("transfer", to, units)
		return intent{to: asset.Address, value: zero, data: data, call: words}, err
	case "APPROVE":
		router, err := c.router()
		if err != nil {
			return intent{}, err
		}
		if !isToken {
			return intent{}, fmt.Errorf("evm: %s is the native asset: it needs no approval", leg.Asset)
		}
		data, err := c.erc20ABI.Pack("approve", router, units)
		return intent{to: asset.Address, value: zero, data: data, call: call{Contract: asset.Symbol + " (ERC-20)", Method: "approve",
			Args: map[string]string{"spender": router.Hex() + " (swap router)", "amount": amount}}}, err
	case "SWAP":
		return c.swap(ctx, leg, from, asset, isToken, units)
	case "DEPOSIT", "WITHDRAW", "CLAIM":
		vault, err := c.vaultOf(leg)
		if err != nil {
			return intent{}, err
		}
		words := call{Contract: fmt.Sprintf("%s %s vault (ERC-4626)", leg.Protocol, leg.Asset)}
		var data []byte
		switch leg.Kind {
		case "DEPOSIT":
			words.Method, words.Args = "deposit", map[string]string{"assets": amount, "receiver": from.Hex()}
			data, err = c.vaultABI.Pack("deposit", units, from)
		case "WITHDRAW":
			words.Method, words.Args = "withdraw", map[string]string{"assets": amount, "receiver": from.Hex(), "owner": from.Hex()}
			data, err = c.vaultABI.Pack("withdraw", units, from, from)
		default:
			words.Method, words.Args = "claimRewards", map[string]string{"to": from.Hex()}
			data, err = c.vaultABI.Pack("claimRewards", from)
		}
		return intent{to: vault, value: zero, data: data, call: words}, err
	case "DRAW", "REPAY":
		pool, ok := c.cfg.Pools[leg.Protocol]
		if !ok {
			return intent{}, fmt.Errorf("evm: %s has no %s lending pool configured", c.cfg.Name, leg.Protocol)
		}
		if !isToken {
			return intent{}, fmt.Errorf("evm: %s lends ERC-20 assets, not the native %s", leg.Protocol, leg.Asset)
		}
		words := call{Contract: fmt.Sprintf("%s pool (%s)", leg.Protocol, pool.Kind)}
		var data []byte
		if leg.Kind == "DRAW" {
			words.Method, words.Args = "borrow", map[string]string{"asset": asset.Symbol, "amount": amount, "interestRateMode": "variable", "onBehalfOf": from.Hex()}
			data, err = c.poolABI.Pack("borrow", asset.Address, units, interestRateVariable, uint16(0), from)
		} else {
			words.Method, words.Args = "repay", map[string]string{"asset": asset.Symbol, "amount": amount, "interestRateMode": "variable", "onBehalfOf": from.Hex()}
			data, err = c.poolABI.Pack("repay", asset.Address, units, interestRateVariable, from)
		}
		return intent{to: pool.Address, value: zero, data: data, call: words}, err
	}
	return intent{}, fmt.Errorf("evm: no call for a %s leg", leg.Kind)
}

func (c *Chain) router() (common.Address, error) {
	if c.cfg.SwapRouter == nil {
		return common.Address{}, fmt.Errorf("evm: %s has no swap router configured", c.cfg.Name)
	}
	return c.cfg.SwapRouter.Address, nil
}

func (c *Chain) vaultOf(leg chain.Leg) (common.Address, error) {
	if v, ok := c.cfg.Vaults[leg.Protocol][leg.Asset]; ok {
		return v, nil
	}
	return common.Address{}, fmt.Errorf("%w: %s has no %s vault for %s configured", chain.ErrUnsupportedAsset, c.cfg.Name, leg.Protocol, leg.Asset)
}

// swap sells the leg's asset for BuyAsset at the router's quote, accepting at least the
// quote less MaxSlippageBps.
func (c *Chain) swap(ctx context.Context, leg chain.Leg, from common.Address, sell Token, sellIsToken bool, amountIn *big.Int) (intent, error) {
	router, err := c.router()
	if err != nil {
		return intent{}, err
	}
	// The zero address stands for the native asset on either side.
	buy, _, err := c.cfg.token(leg.BuyAsset)
	if err != nil {
		return intent{}, err
	}
	var quote *big.Int
	if err := c.view(ctx, router, c.routerABI, "quote", &quote, sell.Address, buy.Address, amountIn); err != nil {
		return intent{}, fmt.Errorf("evm: quoting %s → %s: %w", leg.Asset, leg.BuyAsset, err)
	}
	minOut := new(big.Int).Mul(quote, big.NewInt(int64(10_000-leg.MaxSlippageBps)))
	minOut.Quo(minOut, big.NewInt(10_000))
	value := new(big.Int)
	if !sellIsToken {
		value = amountIn
	}
	data, err := c.routerABI.Pack("swapExactInput", sell.Address, buy.Address, amountIn, minOut, from)
	return intent{to: router, value: value, data: data, call: call{Contract: "swap router (" + c.cfg.SwapRouter.Kind + ")",
		Method: "swapExactInput", Args: map[string]string{"sell": leg.Amount.String() + " " + leg.Asset, "buy": leg.BuyAsset,
			"minAmountOut": fmt.Sprintf("%s (base units of %s)", minOut, leg.BuyAsset), "recipient": from.Hex()}}}, err
}

// Describe says what the leg's transaction will do, from the configuration alone: the
// table of legCall, with the payee or the wallet as the receiver, the amount in base units,
// and the contract and method called (docs/signer.md shows how a signer checks a
// transaction against it).
func (c *Chain) Describe(leg chain.Leg) (chain.Intent, error) {
	if err := c.serves(leg.Chain); err != nil {
		return chain.Intent{}, err
	}
	if !common.IsHexAddress(leg.From) {
		return chain.Intent{}, fmt.Errorf("evm: the wallet address %q is not an EVM address", leg.From)
	}
	in := chain.Intent{Leg: leg.Kind, To: common.HexToAddress(leg.From).Hex(), Asset: leg.Asset, Amount: "0"}
	asset, isToken, err := c.cfg.token(leg.Asset)
	if leg.Kind != "CLAIM" {
		if err != nil {
			return chain.Intent{}, err
		}
		units, err := Units(leg.Amount, asset.Decimals)
		if err != nil {
			return chain.Intent{}, err
		}
		in.Amount = units.String()
	}
	switch leg.Kind {
	case "TRANSFER":
		if len(leg.Recipients) > 0 {
			return c.describeBatch(leg, in, asset, isToken)
		}
		if !common.IsHexAddress(leg.To) {
			return chain.Intent{}, fmt.Errorf("evm: the destination %q is not an address", leg.To)
		}
		in.To = common.HexToAddress(leg.To).Hex()
		if isToken {
			in.Contract, in.Method = asset.Address.Hex(), "transfer"
		}
	case "APPROVE":
		router, err := c.router()
		if err != nil {
			return chain.Intent{}, err
		}
		if !isToken {
			return chain.Intent{}, fmt.Errorf("evm: %s is the native asset: it needs no approval", leg.Asset)
		}
		in.To, in.Contract, in.Method = router.Hex(), asset.Address.Hex(), "approve"
	case "SWAP":
		router, err := c.router()
		if err != nil {
			return chain.Intent{}, err
		}
		in.Contract, in.Method = router.Hex(), "swapExactInput"
	case "DEPOSIT", "WITHDRAW", "CLAIM":
		vault, err := c.vaultOf(leg)
		if err != nil {
			return chain.Intent{}, err
		}
		in.Contract, in.Method = vault.Hex(), map[string]string{"DEPOSIT": "deposit", "WITHDRAW": "withdraw", "CLAIM": "claimRewards"}[leg.Kind]
	case "DRAW", "REPAY":
		pool, ok := c.cfg.Pools[leg.Protocol]
		if !ok {
			return chain.Intent{}, fmt.Errorf("evm: %s has no %s lending pool configured", c.cfg.Name, leg.Protocol)
		}
		in.Contract, in.Method = pool.Address.Hex(), map[string]string{"DRAW": "borrow", "REPAY": "repay"}[leg.Kind]
	default:
		return chain.Intent{}, fmt.Errorf("evm: no call for a %s leg", leg.Kind)
	}
	return in, nil
}
