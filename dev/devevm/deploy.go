// Package devevm runs the dev bundle's EVM chains: real go-ethereum chains in process,
// with the dev contracts (tokens, swap router, vaults, lending pools) deployed and the
// demo wallets funded. It is development support, never linked into `treasury`.
package devevm

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
)

// Plan is what to deploy on one chain and whom to fund.
type Plan struct {
	Name        string
	ChainID     uint64
	NativeAsset string
	// Tokens are the ERC-20 assets to deploy, with their decimals.
	Tokens []TokenPlan
	// PricesUSD price every asset, native included, for the swap router.
	PricesUSD map[string]decimal.Decimal
	// Protocols get a vault per token and a lending pool each.
	Protocols []string
	// Funds are the wallets' starting holdings, by address then asset.
	Funds map[common.Address]map[string]decimal.Decimal
	// Spenders are the wallets' keys: each grants the vaults, the pools and the batch
	// transfer contract an allowance on every token, once, as a treasury sets up a new
	// wallet.
	Spenders []*ecdsa.PrivateKey
}

// TokenPlan is one ERC-20 to deploy.
type TokenPlan struct {
	Symbol   string
	Decimals int32
}

// Deployer sends the deployment's transactions from one funded key.
type Deployer struct {
	Client evm.Client
	Key    *ecdsa.PrivateKey
	// Mine seals a block, on a chain that mines on request; nil where the node mines by itself.
	Mine func()
	// Created are the hashes of the transactions that deployed the tokens, by symbol.
	Created     map[string]common.Hash
	lastCreated common.Hash
}

// reserveUSD is what the router and each pool hold of every asset, in USD; positionUSD is
// what each funded wallet starts with, in USD, in every vault (deposited) and every pool
// (owed), so that a withdrawal or a repayment works from the first order.
var (
	reserveUSD  = decimal.NewFromInt(1_000_000_000)
	positionUSD = decimal.NewFromInt(100_000)
)

// Deploy deploys the plan's contracts, prices the router, fills the reserves, funds the
// wallets and grants the allowances, then returns the adapter's configuration of the chain.
func (d *Deployer) Deploy(ctx context.Context, p Plan) (evm.Config, error) {
	cfg := evm.Config{Name: p.Name, ChainID: p.ChainID, NativeAsset: p.NativeAsset, Vaults: map[string]map[string]common.Address{},
		Pools: map[string]evm.Venue{}}
	token := contracts.ABI(contracts.Token)
	for _, t := range p.Tokens {
		addr, err := d.create(ctx, contracts.Token, t.Symbol+" (dev)", t.Symbol, uint8(t.Decimals))
		if err != nil {
			return cfg, fmt.Errorf("devevm: deploying %s: %w", t.Symbol, err)
		}
		if d.Created == nil {
			d.Created = map[string]common.Hash{}
		}
		d.Created[t.Symbol] = d.lastCreated
		cfg.Tokens = append(cfg.Tokens, evm.Token{Symbol: t.Symbol, Address: addr, Decimals: t.Decimals})
	}
	router, err := d.create(ctx, contracts.SwapRouter)
	if err != nil {
		return cfg, fmt.Errorf("devevm: deploying the swap router: %w", err)
	}
	cfg.SwapRouter = &evm.Venue{Kind: evm.KindFixedPriceRouter, Address: router}
	batch, err := d.create(ctx, contracts.BatchTransfer)
	if err != nil {
		return cfg, fmt.Errorf("devevm: deploying the batch transfer contract: %w", err)
	}
	cfg.BatchTransfer = &batch
	routerABI := contracts.ABI(contracts.SwapRouter)
	assets := append([]evm.Token{{Symbol: p.NativeAsset, Decimals: 18}}, cfg.Tokens...)
	var sends []call
	for _, a := range assets {
		price, ok := p.PricesUSD[a.Symbol]
		if !ok {
			return cfg, fmt.Errorf("devevm: no price for %s", a.Symbol)
		}
		sends = append(sends, call{to: router, abi: routerABI, method: "setPrice",
			args: []any{a.Address, price.Shift(8).BigInt(), uint8(a.Decimals)}})
	}
	var pools []common.Address
	for _, protocol := range p.Protocols {
		cfg.Vaults[protocol] = map[string]common.Address{}
		for _, t := range cfg.Tokens {
			vault, err := d.create(ctx, contracts.Vault, t.Address)
			if err != nil {
				return cfg, fmt.Errorf("devevm: deploying the %s %s vault: %w", protocol, t.Symbol, err)
			}
			cfg.Vaults[protocol][t.Symbol] = vault
		}
		pool, err := d.create(ctx, contracts.LendingPool)
		if err != nil {
			return cfg, fmt.Errorf("devevm: deploying the %s pool: %w", protocol, err)
		}
		cfg.Pools[protocol] = evm.Venue{Kind: evm.KindAaveV3Pool, Address: pool}
		pools = append(pools, pool)
	}
	// Reserves: the router holds every asset; each pool every token.
	for _, a := range assets {
		units, err := evm.Units(reserveUSD.Div(p.PricesUSD[a.Symbol]).Truncate(0), a.Decimals)
		if err != nil {
			return cfg, err
		}
		holders := []common.Address{router}
		if a.Symbol != p.NativeAsset {
			holders = append(holders, pools...)
		}
		for _, h := range holders {
			sends = append(sends, d.credit(token, a, h, units))
		}
	}
	for who, holdings := range p.Funds {
		for symbol, amount := range holdings {
			i := slices.IndexFunc(assets, func(a evm.Token) bool { return a.Symbol == symbol })
			if i < 0 {
				return cfg, fmt.Errorf("devevm: %s has no asset %s", p.Name, symbol)
			}
			units, err := evm.Units(amount, assets[i].Decimals)
			if err != nil {
				return cfg, err
			}
			sends = append(sends, d.credit(token, assets[i], who, units))
		}
	}
	if err := d.send(ctx, d.Key, sends); err != nil {
		return cfg, err
	}
	if err := d.openPositions(ctx, p, cfg, token); err != nil {
		return cfg, err
	}
	unlimited := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	for _, k := range p.Spenders {
		var grants []call
		for _, t := range cfg.Tokens {
			grants = append(grants, call{to: t.Address, abi: token, method: "approve", args: []any{batch, unlimited}})
			for _, protocol := range p.Protocols {
				for _, spender := range []common.Address{cfg.Vaults[protocol][t.Symbol], cfg.Pools[protocol].Address} {
					grants = append(grants, call{to: t.Address, abi: token, method: "approve", args: []any{spender, unlimited}})
				}
			}
		}
		if err := d.send(ctx, k, grants); err != nil {
			return cfg, err
		}
	}
	// The faucet pays back the allowances' gas, so every wallet starts with exactly its
	// planned holdings.
	var refunds []call
	for _, k := range p.Spenders {
		who := crypto.PubkeyToAddress(k.PublicKey)
		planned, ok := p.Funds[who][p.NativeAsset]
		if !ok {
			continue
		}
		want, err := evm.Units(planned, 18)
		if err != nil {
			return cfg, err
		}
		has, err := d.Client.BalanceAt(ctx, who, nil)
		if err != nil {
			return cfg, err
		}
		if short := new(big.Int).Sub(want, has); short.Sign() > 0 {
			refunds = append(refunds, call{to: who, value: short})
		}
	}
	return cfg, d.send(ctx, d.Key, refunds)
}

// Fund credits an address on a deployed chain, as a faucet would: the native asset is
// sent, a token minted.
func (d *Deployer) Fund(ctx context.Context, cfg evm.Config, to common.Address, asset string, amount decimal.Decimal) error {
	a := evm.Token{Symbol: cfg.NativeAsset, Decimals: 18}
	if asset != cfg.NativeAsset {
		i := slices.IndexFunc(cfg.Tokens, func(t evm.Token) bool { return t.Symbol == asset })
		if i < 0 {
			return fmt.Errorf("devevm: %s has no asset %s", cfg.Name, asset)
		}
		a = cfg.Tokens[i]
	}
	units, err := evm.Units(amount, a.Decimals)
	if err != nil {
		return err
	}
	return d.send(ctx, d.Key, []call{d.credit(contracts.ABI(contracts.Token), a, to, units)})
}

// openPositions deposits positionUSD of every token into every vault for each funded
// wallet, and records as much owed to every pool.
func (d *Deployer) openPositions(ctx context.Context, p Plan, cfg evm.Config, token abi.ABI) error {
	vault, pool := contracts.ABI(contracts.Vault), contracts.ABI(contracts.LendingPool)
	faucet := crypto.PubkeyToAddress(d.Key.PublicKey)
	var mints, opens []call
	for _, t := range cfg.Tokens {
		each, err := evm.Units(positionUSD.Div(p.PricesUSD[t.Symbol]).Truncate(t.Decimals), t.Decimals)
		if err != nil {
			return err
		}
		total := new(big.Int).Mul(each, big.NewInt(int64(len(p.Funds)*len(p.Protocols))))
		mints = append(mints, call{to: t.Address, abi: token, method: "mint", args: []any{faucet, total}})
		for _, protocol := range p.Protocols {
			v := cfg.Vaults[protocol][t.Symbol]
			mints = append(mints, call{to: t.Address, abi: token, method: "approve", args: []any{v, total}})
			for who := range p.Funds {
				opens = append(opens, call{to: v, abi: vault, method: "deposit", args: []any{each, who}},
					call{to: cfg.Pools[protocol].Address, abi: pool, method: "openLoan", args: []any{who, t.Address, each}})
			}
		}
	}
	if err := d.send(ctx, d.Key, mints); err != nil {
		return err
	}
	return d.send(ctx, d.Key, opens)
}

// credit mints a token to an address, or sends it the native asset.
func (d *Deployer) credit(token abi.ABI, a evm.Token, to common.Address, units *big.Int) call {
	if a.Address == (common.Address{}) {
		return call{to: to, value: units}
	}
	return call{to: a.Address, abi: token, method: "mint", args: []any{to, units}}
}

// call is one transaction of the deployment.
type call struct {
	to     common.Address
	value  *big.Int
	abi    abi.ABI
	method string
	args   []any
}

// create deploys a contract and returns its address.
func (d *Deployer) create(ctx context.Context, name string, args ...any) (common.Address, error) {
	code := contracts.Bytecode(name)
	if len(args) > 0 {
		packed, err := contracts.ABI(name).Pack("", args...)
		if err != nil {
			return common.Address{}, err
		}
		code = append(slices.Clip(code), packed...)
	}
	receipts, err := d.transact(ctx, d.Key, []txSpec{{data: code}})
	if err != nil {
		return common.Address{}, err
	}
	d.lastCreated = receipts[0].TxHash
	return receipts[0].ContractAddress, nil
}

// send makes the calls from key, all in flight at once, and waits for every receipt.
func (d *Deployer) send(ctx context.Context, key *ecdsa.PrivateKey, calls []call) error {
	specs := make([]txSpec, len(calls))
	for i, c := range calls {
		specs[i] = txSpec{to: &calls[i].to, value: c.value}
		if c.method != "" {
			data, err := c.abi.Pack(c.method, c.args...)
			if err != nil {
				return err
			}
			specs[i].data = data
		}
	}
	_, err := d.transact(ctx, key, specs)
	return err
}

type txSpec struct {
	to    *common.Address
	value *big.Int
	data  []byte
}

// transact signs and sends the transactions with consecutive nonces and waits until each
// is mined successfully.
func (d *Deployer) transact(ctx context.Context, key *ecdsa.PrivateKey, specs []txSpec) ([]*types.Receipt, error) {
	from := crypto.PubkeyToAddress(key.PublicKey)
	chainID, err := d.Client.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	nonce, err := d.Client.NonceAt(ctx, from, nil)
	if err != nil {
		return nil, err
	}
	head, err := d.Client.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	signer := types.LatestSignerForChainID(chainID)
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), big.NewInt(1_000_000_000))
	hashes := make([]common.Hash, len(specs))
	for i, s := range specs {
		value := s.value
		if value == nil {
			value = new(big.Int)
		}
		gas, err := d.Client.EstimateGas(ctx, ethereum.CallMsg{From: from, To: s.to, Value: value, Data: s.data})
		if err != nil {
			// A call may depend on an earlier one still in flight (a mint before an
			// approve does not): give it a generous limit instead.
			gas = 3_000_000
		}
		tx, err := types.SignNewTx(key, signer, &types.DynamicFeeTx{ChainID: chainID, Nonce: nonce + uint64(i),
			GasTipCap: big.NewInt(1_000_000_000), GasFeeCap: feeCap, Gas: gas + gas/2, To: s.to, Value: value, Data: s.data})
		if err != nil {
			return nil, err
		}
		if err := d.Client.SendTransaction(ctx, tx); err != nil {
			return nil, fmt.Errorf("devevm: sending: %w", err)
		}
		hashes[i] = tx.Hash()
	}
	receipts := make([]*types.Receipt, len(hashes))
	for i, h := range hashes {
		r, err := d.wait(ctx, h)
		if err != nil {
			return nil, err
		}
		if r.Status != types.ReceiptStatusSuccessful {
			return nil, fmt.Errorf("devevm: deployment transaction %s reverted", h)
		}
		receipts[i] = r
	}
	return receipts, nil
}

// wait returns a transaction's receipt once it is mined and its block is the head. The
// node indexes a block's transactions a moment before it makes the block its head, and
// until then "latest" (the faucet's next nonce, a wallet's balance) is read from the block
// before: the next transaction would reuse a nonce still in the pool.
func (d *Deployer) wait(ctx context.Context, h common.Hash) (*types.Receipt, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := d.Client.TransactionReceipt(ctx, h)
		mined := err == nil
		switch {
		case mined:
			head, err := d.Client.HeaderByNumber(ctx, nil)
			if err != nil {
				return nil, err
			}
			if head.Number.Cmp(r.BlockNumber) >= 0 {
				return r, nil
			}
		case !evm.NotFound(err):
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("devevm: %s was not mined in time", h)
		}
		pause := 100 * time.Millisecond
		switch {
		case mined:
			pause = 5 * time.Millisecond
		case d.Mine != nil:
			d.Mine()
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}
