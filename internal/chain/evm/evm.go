// Package evm is the chain adapter of EVM chains (ethereum, polygon, any other by
// configuration): EIP-1559 transactions over JSON-RPC to a node, signed by the wallet's
// own secp256k1 key outside the service.
package evm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm/contracts"
	"github.com/opentreasury/treasury/internal/chain/keys"
)

// Client is what the adapter asks of a node: go-ethereum's ethclient over JSON-RPC, or
// its simulated backend's client in tests.
type Client interface {
	ChainID(ctx context.Context) (*big.Int, error)
	BlockNumber(ctx context.Context) (uint64, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	BalanceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (*big.Int, error)
	NonceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (uint64, error)
	CallContract(ctx context.Context, call ethereum.CallMsg, blockNumber *big.Int) ([]byte, error)
	EstimateGas(ctx context.Context, call ethereum.CallMsg) (uint64, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
	TransactionByHash(ctx context.Context, hash common.Hash) (*types.Transaction, bool, error)
	TransactionReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error)
}

// Chain is one EVM chain.
type Chain struct {
	cfg    Config
	client Client
	signer types.Signer
	now    func() time.Time

	erc20ABI, routerABI, vaultABI, poolABI abi.ABI
}

// Dial connects to the chain's node and checks that it serves the configured chain id.
func Dial(ctx context.Context, cfg Config) (*Chain, error) {
	c, err := ethclient.DialContext(ctx, cfg.RPCURL)
	if err != nil {
		return nil, fmt.Errorf("evm: %s: %w", cfg.Name, err)
	}
	return New(ctx, cfg, c)
}

// New returns the adapter of a chain over a node's client, after checking the node's
// chain id and every token's decimals against the configuration.
func New(ctx context.Context, cfg Config, client Client) (*Chain, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	id, err := client.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("evm: %s: reading the node's chain id: %w", cfg.Name, err)
	}
	if id.Uint64() != cfg.ChainID {
		return nil, fmt.Errorf("evm: %s: the node serves chain id %s, the configuration says %d", cfg.Name, id, cfg.ChainID)
	}
	c := &Chain{cfg: cfg, client: client, signer: types.LatestSignerForChainID(id), now: time.Now,
		erc20ABI: contracts.ABI(contracts.Token), routerABI: contracts.ABI(contracts.SwapRouter),
		vaultABI: contracts.ABI(contracts.Vault), poolABI: contracts.ABI(contracts.LendingPool)}
	for _, t := range cfg.Tokens {
		var got uint8
		if err := c.view(ctx, t.Address, c.erc20ABI, "decimals", &got); err != nil {
			return nil, fmt.Errorf("evm: %s: reading %s's decimals at %s: %w", cfg.Name, t.Symbol, t.Address, err)
		}
		if int32(got) != t.Decimals {
			return nil, fmt.Errorf("evm: %s: %s has %d decimals on chain, the configuration says %d", cfg.Name, t.Symbol, got, t.Decimals)
		}
	}
	return c, nil
}

// Config returns the chain's configuration, defaults filled in.
func (c *Chain) Config() Config { return c.cfg }

// view calls a read-only contract function at the latest block.
func (c *Chain) view(ctx context.Context, to common.Address, a abi.ABI, method string, out any, args ...any) error {
	data, err := a.Pack(method, args...)
	if err != nil {
		return err
	}
	res, err := c.client.CallContract(ctx, ethereum.CallMsg{To: &to, Data: data}, nil)
	if err != nil {
		return err
	}
	return a.UnpackIntoInterface(out, method, res)
}

// Balances reads the native balance and every configured token's balanceOf.
func (c *Chain) Balances(ctx context.Context, chainName, address string) (map[string]decimal.Decimal, error) {
	if err := c.serves(chainName); err != nil {
		return nil, err
	}
	if !common.IsHexAddress(address) {
		return nil, fmt.Errorf("evm: %q is not an address", address)
	}
	who := common.HexToAddress(address)
	native, err := c.client.BalanceAt(ctx, who, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]decimal.Decimal{c.cfg.NativeAsset: decimal.NewFromBigInt(native, -18)}
	for _, t := range c.cfg.Tokens {
		var units *big.Int
		if err := c.view(ctx, t.Address, c.erc20ABI, "balanceOf", &units, who); err != nil {
			return nil, fmt.Errorf("evm: %s balanceOf: %w", t.Symbol, err)
		}
		out[t.Symbol] = decimal.NewFromBigInt(units, -t.Decimals)
	}
	return out, nil
}

func (c *Chain) serves(chainName string) error {
	if chainName != c.cfg.Name {
		return fmt.Errorf("%w: the %s adapter does not serve %q", chain.ErrUnknownChain, c.cfg.Name, chainName)
	}
	return nil
}

// Units converts a decimal amount to an asset's base units exactly (chain.BaseUnits), and
// refuses one whose base units do not fit in the 256-bit word a transaction carries them in.
func Units(amount decimal.Decimal, decimals int32) (*big.Int, error) {
	units, err := chain.BaseUnits(amount, decimals)
	if err != nil {
		return nil, err
	}
	if units.BitLen() > 256 {
		// ABI encoding would keep the low 256 bits: another amount than the order's.
		return nil, fmt.Errorf("%w: %s in base units of %d decimals is more than a 256-bit word carries", chain.ErrAmountTooLarge, amount, decimals)
	}
	return units, nil
}

// call is what a leg's transaction does, in words for the signer.
type call struct {
	Contract string            `json:"contract,omitempty"`
	Method   string            `json:"method"`
	Args     map[string]string `json:"args,omitempty"`
}

// fields is a transaction in the readable form a signing request carries.
type fields struct {
	Type                 string `json:"type"`
	ChainID              string `json:"chainId"`
	Nonce                uint64 `json:"nonce"`
	From                 string `json:"from"`
	To                   string `json:"to"`
	Value                string `json:"value"`
	Gas                  uint64 `json:"gas"`
	MaxFeePerGas         string `json:"maxFeePerGas"`
	MaxPriorityFeePerGas string `json:"maxPriorityFeePerGas"`
	Data                 string `json:"data"`
	Call                 call   `json:"call"`
	OrderID              string `json:"orderId"`
	Leg                  string `json:"leg"`
	Position             int    `json:"position"`
}

// intent is a leg as a transaction: where it goes, what it carries, what it says; and the
// token it takes from the wallet, if it takes one.
type intent struct {
	to         common.Address
	value      *big.Int
	data       []byte
	call       call
	token      *Token
	tokenUnits *big.Int
}

// Prepare turns a leg into a transaction and prices it: fees from the node (twice the
// base fee plus the suggested tip, under the configured cap) and gas from its estimate
// with headroom. A call the node says reverts gets a fixed gas limit, so it fails on chain
// with its reason like any other revert.
func (c *Chain) Prepare(ctx context.Context, leg chain.Leg) (chain.Draft, error) {
	if err := c.serves(leg.Chain); err != nil {
		return chain.Draft{}, err
	}
	if !common.IsHexAddress(leg.From) {
		return chain.Draft{}, fmt.Errorf("evm: the wallet address %q is not an EVM address", leg.From)
	}
	if leg.Scheme != "" && leg.Scheme != chain.Secp256k1 {
		return chain.Draft{}, fmt.Errorf("evm: %s transactions are signed with secp256k1, the wallet signs with %s", c.cfg.Name, leg.Scheme)
	}
	if leg.Replaces != nil {
		return c.replacement(ctx, leg)
	}
	from := common.HexToAddress(leg.From)
	in, err := c.intent(ctx, leg, from)
	if err != nil {
		return chain.Draft{}, err
	}
	if in.token != nil {
		var held *big.Int
		if err := c.view(ctx, in.token.Address, c.erc20ABI, "balanceOf", &held, from); err != nil {
			return chain.Draft{}, fmt.Errorf("evm: %s balanceOf: %w", in.token.Symbol, err)
		}
		if held.Cmp(in.tokenUnits) < 0 {
			return chain.Draft{}, fmt.Errorf("%w: %s holds %s %s, the %s leg spends %s", chain.ErrInsufficientFunds, from.Hex(),
				decimal.NewFromBigInt(held, -in.token.Decimals), in.token.Symbol, leg.Kind, leg.Amount)
		}
	}
	feeCap, tip, err := c.fees(ctx, nil)
	if err != nil {
		return chain.Draft{}, err
	}
	gas, err := c.client.EstimateGas(ctx, ethereum.CallMsg{From: from, To: &in.to, Value: in.value, Data: in.data})
	switch {
	case err != nil && isRevert(err):
		gas = c.cfg.RevertingCallGas
	case err != nil && !ShortOfFunds(err):
		return chain.Draft{}, fmt.Errorf("evm: estimating gas: %w", err)
	case err != nil:
		// The node cannot run the call without the value it sends: the check below says
		// what is missing.
		gas = c.cfg.RevertingCallGas
	default:
		gas += gas * uint64(c.cfg.GasHeadroomPercent) / 100
	}
	// A node admits a transaction only while its sender holds its value and its gas at the
	// fee cap: short of that, the transaction can never be sent.
	native, err := c.client.BalanceAt(ctx, from, nil)
	if err != nil {
		return chain.Draft{}, err
	}
	needs := new(big.Int).Add(in.value, new(big.Int).Mul(new(big.Int).SetUint64(gas), feeCap))
	if native.Cmp(needs) < 0 {
		return chain.Draft{}, fmt.Errorf("%w: %s holds %s %s, the %s leg needs %s (its value and up to %s for gas)", chain.ErrInsufficientFunds,
			from.Hex(), decimal.NewFromBigInt(native, -18), c.cfg.NativeAsset, leg.Kind, decimal.NewFromBigInt(needs, -18),
			decimal.NewFromBigInt(new(big.Int).Sub(needs, in.value), -18))
	}
	floor, err := c.client.NonceAt(ctx, from, nil)
	if err != nil {
		return chain.Draft{}, err
	}
	f := fields{Type: "eip1559", ChainID: new(big.Int).SetUint64(c.cfg.ChainID).String(), From: from.Hex(), To: in.to.Hex(),
		Value: in.value.String(), Gas: gas, MaxFeePerGas: feeCap.String(), MaxPriorityFeePerGas: tip.String(),
		Data: hexutil.Encode(in.data), Call: in.call, OrderID: leg.OrderID, Leg: leg.Kind, Position: leg.Position}
	return chain.Draft{Chain: c.cfg.Name, Scheme: chain.Secp256k1, Nonced: true, NonceFloor: floor,
		Seal: func(nonce uint64) (chain.Unsigned, error) {
			f := f
			f.Nonce = nonce
			return c.seal(f)
		}}, nil
}

func (c *Chain) seal(f fields) (chain.Unsigned, error) {
	tx, err := f.transaction()
	if err != nil {
		return chain.Unsigned{}, err
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return chain.Unsigned{}, err
	}
	unsigned, err := UnsignedBytes(tx)
	if err != nil {
		return chain.Unsigned{}, err
	}
	nonce := f.Nonce
	return chain.Unsigned{Scheme: chain.Secp256k1, Fields: raw, Raw: unsigned, Digest: hexutil.Encode(c.signer.Hash(tx).Bytes())[2:], Nonce: &nonce}, nil
}

// fees prices a transaction from the node: twice the latest base fee plus the suggested
// tip, under the configured cap. A replacement (of a transaction paying atLeast) pays at
// least 1/8 more on both, as nodes require to replace a transaction in their pool.
func (c *Chain) fees(ctx context.Context, atLeast *types.Transaction) (feeCap, tip *big.Int, err error) {
	head, err := c.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	if head.BaseFee == nil {
		return nil, nil, fmt.Errorf("evm: %s: the node's blocks carry no base fee; the adapter sends EIP-1559 transactions only", c.cfg.Name)
	}
	if tip, err = c.client.SuggestGasTipCap(ctx); err != nil {
		return nil, nil, err
	}
	if atLeast != nil {
		tip = maxBig(tip, bump(atLeast.GasTipCap()))
	}
	feeCap = new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip)
	if atLeast != nil {
		feeCap = maxBig(feeCap, bump(atLeast.GasFeeCap()))
	}
	limit := c.cfg.maxFeePerGas()
	// A replacement pays at most the cap too, as long as the cap still outbids what it
	// replaces: nodes take it then, and the chain may again when its fees come down.
	if atLeast != nil && (limit.Cmp(bump(atLeast.GasFeeCap())) < 0 || limit.Cmp(bump(atLeast.GasTipCap())) < 0) {
		return nil, nil, fmt.Errorf("evm: %s: replacing the transaction would pay more than the cap of %d gwei per gas", c.cfg.Name, c.cfg.MaxFeePerGasGwei)
	}
	if feeCap.Cmp(limit) > 0 {
		feeCap = limit
	}
	if tip.Cmp(feeCap) > 0 {
		tip = new(big.Int).Set(feeCap)
	}
	return feeCap, tip, nil
}

// bump is v and an eighth more, and one: above a node's 10 % replacement threshold.
func bump(v *big.Int) *big.Int {
	out := new(big.Int).Add(v, new(big.Int).Quo(v, big.NewInt(8)))
	return out.Add(out, big.NewInt(1))
}

func maxBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}

// replacement builds the transaction that replaces a stuck one: the same call, gas and
// nonce, and fees that the chain takes now and that outbid the stuck transaction's.
func (c *Chain) replacement(ctx context.Context, leg chain.Leg) (chain.Draft, error) {
	var f fields
	if err := json.Unmarshal(leg.Replaces, &f); err != nil {
		return chain.Draft{}, fmt.Errorf("evm: the transaction to replace does not parse: %w", err)
	}
	stuck, err := f.transaction()
	if err != nil {
		return chain.Draft{}, err
	}
	if !strings.EqualFold(f.From, leg.From) {
		return chain.Draft{}, fmt.Errorf("evm: the transaction to replace is sent from %s, not from the wallet %s", f.From, leg.From)
	}
	feeCap, tip, err := c.fees(ctx, stuck)
	if err != nil {
		return chain.Draft{}, err
	}
	f.MaxFeePerGas, f.MaxPriorityFeePerGas = feeCap.String(), tip.String()
	return chain.Draft{Chain: c.cfg.Name, Scheme: chain.Secp256k1,
		Seal: func(uint64) (chain.Unsigned, error) { return c.seal(f) }}, nil
}

// transaction rebuilds the unsigned EIP-1559 transaction the fields describe.
func (f fields) transaction() (*types.Transaction, error) {
	num := func(name, s string) (*big.Int, error) {
		v, ok := new(big.Int).SetString(s, 10)
		if !ok || v.Sign() < 0 {
			return nil, fmt.Errorf("evm: the transaction's %s %q is not a number", name, s)
		}
		return v, nil
	}
	chainID, err := num("chainId", f.ChainID)
	if err != nil {
		return nil, err
	}
	value, err := num("value", f.Value)
	if err != nil {
		return nil, err
	}
	feeCap, err := num("maxFeePerGas", f.MaxFeePerGas)
	if err != nil {
		return nil, err
	}
	tip, err := num("maxPriorityFeePerGas", f.MaxPriorityFeePerGas)
	if err != nil {
		return nil, err
	}
	data, err := hexutil.Decode(f.Data)
	if err != nil {
		return nil, fmt.Errorf("evm: the transaction's data: %w", err)
	}
	if !common.IsHexAddress(f.To) {
		return nil, fmt.Errorf("evm: the transaction's to %q is not an address", f.To)
	}
	to := common.HexToAddress(f.To)
	return types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: f.Nonce, GasTipCap: tip, GasFeeCap: feeCap,
		Gas: f.Gas, To: &to, Value: value, Data: data}), nil
}

// signed rebuilds the transaction a signing request described, with its signature, after
// checking that it is the very transaction whose digest was signed.
func (c *Chain) signed(tx chain.SignedTx) (*types.Transaction, error) {
	if err := c.serves(tx.Chain); err != nil {
		return nil, err
	}
	var f fields
	if err := json.Unmarshal(tx.Fields, &f); err != nil {
		return nil, fmt.Errorf("evm: the signing request's transaction does not parse: %w", err)
	}
	unsigned, err := f.transaction()
	if err != nil {
		return nil, err
	}
	if got := hexutil.Encode(c.signer.Hash(unsigned).Bytes())[2:]; !strings.EqualFold(got, tx.Digest) {
		return nil, fmt.Errorf("evm: the transaction does not hash to the signed digest (%s, signed %s)", got, tx.Digest)
	}
	out, err := unsigned.WithSignature(c.signer, keys.Normalize(tx.Signature))
	if err != nil {
		return nil, err
	}
	sender, err := types.Sender(c.signer, out)
	if err != nil || !strings.EqualFold(sender.Hex(), f.From) {
		return nil, fmt.Errorf("evm: the signature is not the sender's (%s)", f.From)
	}
	return out, nil
}

// Broadcast sends the signed transaction as a raw transaction. A node that already has it
// (a retry) answers with its hash.
func (c *Chain) Broadcast(ctx context.Context, stx chain.SignedTx) (string, error) {
	tx, err := c.signed(stx)
	if err != nil {
		return "", err
	}
	if err := c.client.SendTransaction(ctx, tx); err != nil {
		msg := strings.ToLower(err.Error())
		if !strings.Contains(msg, "already known") && !strings.Contains(msg, "nonce too low") {
			return "", fmt.Errorf("evm: sending %s: %w", tx.Hash(), err)
		}
		// The node has it, or has mined a transaction at its nonce: it is ours if the
		// chain knows its hash; otherwise the nonce went to another transaction.
		_, found, kerr := c.Known(ctx, stx)
		switch {
		case kerr != nil:
			return "", fmt.Errorf("evm: sending %s: %w", tx.Hash(), err)
		case !found && strings.Contains(msg, "nonce too low"):
			return "", fmt.Errorf("evm: sending %s: %w (%v)", tx.Hash(), chain.ErrNonceUsed, err)
		case !found:
			return "", fmt.Errorf("evm: sending %s: %w", tx.Hash(), err)
		}
	}
	return tx.Hash().Hex(), nil
}

// Known looks the signed transaction up by its hash, pending or mined.
func (c *Chain) Known(ctx context.Context, stx chain.SignedTx) (string, bool, error) {
	tx, err := c.signed(stx)
	if err != nil {
		return "", false, err
	}
	_, _, err = c.client.TransactionByHash(ctx, tx.Hash())
	if NotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return tx.Hash().Hex(), true, nil
}

// Lapsed is always false: a transaction's nonce keeps it valid until another at that nonce
// is mined, which replacement handles.
func (c *Chain) Lapsed(context.Context, string, string, json.RawMessage) (bool, error) {
	return false, nil
}

// Status reads the transaction's receipt: pending until its block is Confirmations deep
// on the canonical chain, then confirmed, or failed with the revert reason. A receipt
// whose block is no longer canonical (a reorg dropped it) is pending again.
func (c *Chain) Status(ctx context.Context, chainName, hash string) (chain.TxStatus, error) {
	if err := c.serves(chainName); err != nil {
		return chain.TxStatus{}, err
	}
	h := common.HexToHash(hash)
	receipt, err := c.client.TransactionReceipt(ctx, h)
	if NotFound(err) {
		return c.waiting(ctx, h)
	}
	if err != nil {
		return chain.TxStatus{}, err
	}
	block, err := c.client.HeaderByNumber(ctx, receipt.BlockNumber)
	if errors.Is(err, ethereum.NotFound) {
		return chain.TxStatus{State: chain.TxPending}, nil
	}
	if err != nil {
		return chain.TxStatus{}, err
	}
	if block.Hash() != receipt.BlockHash {
		return chain.TxStatus{State: chain.TxPending}, nil
	}
	head, err := c.client.BlockNumber(ctx)
	if err != nil {
		return chain.TxStatus{}, err
	}
	depth := 0
	if head >= receipt.BlockNumber.Uint64() {
		depth = int(head-receipt.BlockNumber.Uint64()) + 1
	}
	if depth < c.cfg.Confirmations {
		wait := time.Duration(c.cfg.Confirmations-depth) * time.Duration(c.cfg.BlockTime)
		return chain.TxStatus{State: chain.TxPending, Confirmations: depth, Expected: c.now().Add(wait)}, nil
	}
	if receipt.Status == types.ReceiptStatusSuccessful {
		return chain.TxStatus{State: chain.TxConfirmed, Confirmations: depth}, nil
	}
	return chain.TxStatus{State: chain.TxFailed, Confirmations: depth, Reason: c.revertReason(ctx, h, receipt)}, nil
}

// waiting reports a transaction not mined yet, and whether it is stuck: the node no
// longer holds it, or its fee cap is below the base fee its next block asks.
func (c *Chain) waiting(ctx context.Context, h common.Hash) (chain.TxStatus, error) {
	tx, _, err := c.client.TransactionByHash(ctx, h)
	if errors.Is(err, ethereum.NotFound) {
		return chain.TxStatus{State: chain.TxPending, Underpriced: true, Dropped: true}, nil
	}
	if NotFound(err) {
		// Still indexing (a node just restarted): not known to be gone.
		return chain.TxStatus{State: chain.TxPending}, nil
	}
	if err != nil {
		return chain.TxStatus{}, err
	}
	head, err := c.client.HeaderByNumber(ctx, nil)
	if err != nil {
		return chain.TxStatus{}, err
	}
	return chain.TxStatus{State: chain.TxPending, Underpriced: head.BaseFee != nil && tx.GasFeeCap().Cmp(head.BaseFee) < 0}, nil
}

// revertReason replays a reverted transaction as a call on the state before its block and
// reads the reason it reverts with.
func (c *Chain) revertReason(ctx context.Context, hash common.Hash, receipt *types.Receipt) string {
	const unknown = "reverted (the chain gave no reason)"
	tx, _, err := c.client.TransactionByHash(ctx, hash)
	if err != nil {
		return unknown
	}
	from, err := types.Sender(c.signer, tx)
	if err != nil {
		return unknown
	}
	parent := new(big.Int).Sub(receipt.BlockNumber, big.NewInt(1))
	_, err = c.client.CallContract(ctx, ethereum.CallMsg{From: from, To: tx.To(), Gas: tx.Gas(), Value: tx.Value(), Data: tx.Data()}, parent)
	if reason := reasonOf(err); reason != "" {
		return "reverted: " + reason
	}
	if receipt.GasUsed == tx.Gas() {
		return "reverted: out of gas"
	}
	return unknown
}

// NotFound reports whether a node's answer means it has no such transaction or receipt
// (yet): a node still indexing its transactions says so instead.
func NotFound(err error) bool {
	return errors.Is(err, ethereum.NotFound) || (err != nil && strings.Contains(err.Error(), "indexing is in progress"))
}

// ShortOfFunds reports a node's refusal of a call whose sender lacks the value it sends
// (geth: "insufficient funds for transfer", "insufficient funds for gas * price + value").
func ShortOfFunds(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "insufficient funds")
}

// isRevert reports whether a node's error says the call reverts.
func isRevert(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "execution reverted")
}

// reasonOf reads the Error(string) reason from a node's revert error.
func reasonOf(err error) string {
	var de rpc.DataError
	if errors.As(err, &de) {
		if s, ok := de.ErrorData().(string); ok {
			if data, derr := hexutil.Decode(s); derr == nil {
				if reason, uerr := abi.UnpackRevert(data); uerr == nil {
					return reason
				}
			}
		}
	}
	if isRevert(err) {
		msg := err.Error()
		if i := strings.Index(strings.ToLower(msg), "execution reverted: "); i >= 0 {
			return msg[i+len("execution reverted: "):]
		}
	}
	return ""
}

// Digest recomputes, from a signing request's readable transaction alone, the EIP-1559
// signing hash a signer signs, and names the sender: a signer checks both before signing
// rather than trusting the request's digest.
func Digest(unsignedTx []byte) (digest, from string, err error) {
	var f fields
	if err := json.Unmarshal(unsignedTx, &f); err != nil {
		return "", "", fmt.Errorf("evm: the unsigned transaction does not parse: %w", err)
	}
	if f.Type != "eip1559" {
		return "", "", fmt.Errorf("evm: the unsigned transaction is of type %q, not eip1559", f.Type)
	}
	tx, err := f.transaction()
	if err != nil {
		return "", "", err
	}
	return hexutil.Encode(types.LatestSignerForChainID(tx.ChainId()).Hash(tx).Bytes())[2:], f.From, nil
}
