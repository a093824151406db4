package evm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain"
)

// Simulator is a node that runs calls on its latest state without sending them
// (eth_simulateV1): go-ethereum's ethclient, or its simulated backend's client.
type Simulator interface {
	SimulateV1(ctx context.Context, opts ethclient.SimulateOptions, block *rpc.BlockNumberOrHash) ([]ethclient.SimulateBlockResult, error)
}

// ErrCannotSimulate is a chain whose node's client offers no eth_simulateV1: a chain that
// does not simulate (chain.ErrNoSimulator).
var ErrCannotSimulate = fmt.Errorf("%w: the node's client offers no eth_simulateV1", chain.ErrNoSimulator)

var (
	transferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))
	approvalTopic = crypto.Keccak256Hash([]byte("Approval(address,address,uint256)"))
	// valueTopics are the events of other standards that move or grant value: an NFT's
	// transfer and approval share ERC-20's signatures with an indexed token id (four
	// topics); ApprovalForAll, and ERC-1155's transfers.
	valueTopics = map[common.Hash]string{
		transferTopic: "Transfer", approvalTopic: "Approval",
		crypto.Keccak256Hash([]byte("ApprovalForAll(address,address,bool)")):                       "ApprovalForAll",
		crypto.Keccak256Hash([]byte("TransferSingle(address,address,address,uint256,uint256)")):    "TransferSingle",
		crypto.Keccak256Hash([]byte("TransferBatch(address,address,address,uint256[],uint256[])")): "TransferBatch",
	}
	// NativeAddress is where eth_simulateV1 with traceTransfers logs the native asset's
	// movements, as ERC-20 Transfer events (ERC-7528's address for the native asset).
	NativeAddress = common.HexToAddress("0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE")
)

// Movement is an amount that left one address for another in a simulated call: the
// native asset (Token is NativeAddress) or an ERC-20's Transfer event.
type Movement struct {
	Token    common.Address
	From, To common.Address
	Amount   *big.Int
}

// Allowance is an ERC-20 Approval event: Owner let Spender spend Amount of Token.
type Allowance struct {
	Token, Owner, Spender common.Address
	Amount                *big.Int
}

// Other is an event that moves or grants value in a shape other than ERC-20's (Name says
// which), with the addresses its topics name: a check that cannot weigh it refuses it
// when it names the wallet.
type Other struct {
	Token     common.Address
	Name      string
	Addresses []common.Address
}

// Outcome is what one simulated call did on the node's latest state.
type Outcome struct {
	Reverted bool
	// Reason is the revert's reason, as the node gives it.
	Reason    string
	GasUsed   uint64
	Movements []Movement
	Approvals []Allowance
	Others    []Other
}

// Node errors that answer for the calls rather than for the node (go-ethereum's codes for
// eth_simulateV1): the sender cannot pay the value, or the gas is below the intrinsic.
const (
	codeInsufficientFunds = -38014
	codeIntrinsicGas      = -38013
)

// Simulate runs calls one after another in one block on top of the node's latest state,
// without signature or fee checks, tracing native transfers, and reads what each did: the
// block whose state they ran on and one Outcome per call. A later call sees what the
// earlier ones left (a swap sees the allowance of the approve before it). A node that
// refuses the calls themselves (a sender short of the value) answers with every call
// reverted for that reason; any other failure is an error, without the node's URL.
func Simulate(ctx context.Context, node Simulator, calls []ethereum.CallMsg) (uint64, []Outcome, error) {
	latest := rpc.BlockNumberOrHashWithNumber(rpc.LatestBlockNumber)
	blocks, err := node.SimulateV1(ctx, ethclient.SimulateOptions{TraceTransfers: true,
		BlockStateCalls: []ethclient.SimulateBlock{{Calls: calls}}}, &latest)
	var refused rpc.Error
	if errors.As(err, &refused) && (refused.ErrorCode() == codeInsufficientFunds || refused.ErrorCode() == codeIntrinsicGas) {
		out := make([]Outcome, len(calls))
		for i := range out {
			out[i] = Outcome{Reverted: true, Reason: refused.Error()}
		}
		return 0, out, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("evm: eth_simulateV1: %s", chain.RedactURL(err))
	}
	if len(blocks) != 1 || len(blocks[0].Calls) != len(calls) {
		return 0, nil, fmt.Errorf("evm: eth_simulateV1 answered %d blocks for 1, of %d calls", len(blocks), len(calls))
	}
	out := make([]Outcome, len(calls))
	for i, r := range blocks[0].Calls {
		o := Outcome{Reverted: r.Status != 1, GasUsed: r.GasUsed}
		if r.Error != nil {
			o.Reason = r.Error.Message
		}
		for _, l := range r.Logs {
			if l == nil || len(l.Topics) == 0 {
				continue
			}
			name, moves := valueTopics[l.Topics[0]]
			if !moves {
				continue
			}
			if len(l.Topics) == 3 && len(l.Data) == 32 && (name == "Transfer" || name == "Approval") {
				from, to := common.BytesToAddress(l.Topics[1].Bytes()), common.BytesToAddress(l.Topics[2].Bytes())
				amount := new(big.Int).SetBytes(l.Data)
				if name == "Transfer" {
					o.Movements = append(o.Movements, Movement{Token: l.Address, From: from, To: to, Amount: amount})
				} else {
					o.Approvals = append(o.Approvals, Allowance{Token: l.Address, Owner: from, Spender: to, Amount: amount})
				}
				continue
			}
			other := Other{Token: l.Address, Name: name}
			for _, t := range l.Topics[1:] {
				other.Addresses = append(other.Addresses, common.BytesToAddress(t.Bytes()))
			}
			o.Others = append(o.Others, other)
		}
		out[i] = o
	}
	// The calls ran in a block of their own on top of the latest: the state they saw is
	// the block before it.
	var block uint64
	if n := blocks[0].Number; n != nil && n.Sign() > 0 {
		block = n.Uint64() - 1
	}
	return block, out, nil
}

// Change is an address's net change in one asset over a call: signed base units.
type Change struct {
	Address, Token common.Address
	Amount         *big.Int
}

// Changes nets a call's movements per address and asset, leaving out what nets to zero,
// in a stable order (address, then token).
func (o Outcome) Changes() []Change {
	type key struct{ addr, token common.Address }
	net := map[key]*big.Int{}
	add := func(k key, v *big.Int) {
		if net[k] == nil {
			net[k] = new(big.Int)
		}
		net[k].Add(net[k], v)
	}
	for _, m := range o.Movements {
		add(key{m.From, m.Token}, new(big.Int).Neg(m.Amount))
		add(key{m.To, m.Token}, m.Amount)
	}
	var out []Change
	for k, v := range net {
		if v.Sign() != 0 {
			out = append(out, Change{Address: k.addr, Token: k.token, Amount: v})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Address != out[j].Address {
			return out[i].Address.Cmp(out[j].Address) < 0
		}
		return out[i].Token.Cmp(out[j].Token) < 0
	})
	return out
}

// CheckMovements holds a simulated transaction to the intent it was checked against (the
// verifying signer's third check, SPEC 3.5a): it does not revert; what leaves the wallet
// is what the intent moves and nothing else; what the leg is for reaches the wallet; and
// only an approve grants an allowance. Leg by leg:
//   - TRANSFER sends exactly its amount of its asset, all of it to its recipient;
//   - APPROVE takes nothing, and emits exactly one Approval: its amount of its token to its
//     spender;
//   - SWAP spends exactly its amount of the sold asset and brings the wallet at least the
//     call's minimum of the bought one;
//   - DEPOSIT spends exactly its amount of one asset, to the vault;
//   - WITHDRAW gives up only the vault's own shares (burnt, or to the vault) and brings
//     the wallet its amount of one asset;
//   - DRAW takes nothing and brings the wallet its amount of the borrowed asset;
//   - REPAY spends at most its amount of the repaid asset;
//   - CLAIM takes nothing.
//
// A call of another leg may leave only the allowance of the contract it calls (a token
// that emits Approval as an allowance is spent). An event of another standard that moves
// or grants value (an NFT's, ERC-1155's, ApprovalForAll) and names the wallet is refused:
// it cannot be weighed. Fees are not movements: the fee cap bounds them.
func CheckMovements(tx *types.Transaction, in chain.Intent, wallet common.Address, o Outcome) error {
	if o.Reverted {
		return fmt.Errorf("it reverts: %s", o.Reason)
	}
	amount, ok := new(big.Int).SetString(in.Amount, 10)
	if !ok {
		return fmt.Errorf("the intent's amount %q is not base units", in.Amount)
	}
	for _, other := range o.Others {
		if slices.Contains(other.Addresses, wallet) {
			return fmt.Errorf("a %s event of %s names the wallet: value this check cannot weigh", other.Name, other.Token.Hex())
		}
	}
	var args []any
	if len(tx.Data()) > 0 {
		c, err := DecodeCall(tx.Data())
		if err != nil {
			return fmt.Errorf("the %s call does not decode: %v", in.Leg, err)
		}
		args = c.Args
	}
	argAsset := func(i int) (common.Address, error) {
		if len(args) <= i {
			return common.Address{}, fmt.Errorf("the %s call has no argument %d", in.Leg, i)
		}
		a, _ := args[i].(common.Address)
		if a == (common.Address{}) {
			return NativeAddress, nil
		}
		return a, nil
	}
	if in.Leg == "TRANSFER" && len(in.Recipients) > 0 {
		asset := NativeAddress
		if in.Method == batchToken {
			var err error
			if asset, err = argAsset(0); err != nil {
				return err
			}
		}
		if err := batchMovements(in, asset, wallet, o); err != nil {
			return err
		}
		return checkAllowances(tx, in, wallet, o, amount)
	}
	vault := common.HexToAddress(in.Contract)
	// out is what may leave the wallet: of asset (any one asset when anyAsset), to
	// recipient when set, exactly amount (at most, when atMost); nothing when !spends.
	var (
		spends, atMost, anyAsset bool
		asset                    common.Address
		recipient                *common.Address
		// gains is what must reach the wallet: at least gainAtLeast of gainAsset (any one
		// asset but the vault's shares when gainAny).
		gains, gainAny bool
		gainAsset      common.Address
		gainAtLeast    *big.Int
		err            error
	)
	switch in.Leg {
	case "TRANSFER":
		spends, asset = true, NativeAddress
		if in.Contract != "" {
			asset = common.HexToAddress(in.Contract)
		}
		to := common.HexToAddress(in.To)
		recipient = &to
	case "SWAP":
		spends = true
		if asset, err = argAsset(0); err != nil {
			return err
		}
		if gainAsset, err = argAsset(1); err != nil {
			return err
		}
		minOut, _ := args[3].(*big.Int)
		gains, gainAtLeast = true, minOut
	case "DEPOSIT":
		spends, anyAsset, recipient = true, true, &vault
	case "WITHDRAW":
		gains, gainAny, gainAtLeast = true, true, amount
	case "DRAW":
		gains, gainAtLeast = true, amount
		if gainAsset, err = argAsset(0); err != nil {
			return err
		}
	case "REPAY":
		spends, atMost = true, true
		if asset, err = argAsset(0); err != nil {
			return err
		}
	case "APPROVE", "CLAIM":
	default:
		return fmt.Errorf("no movements known for a %s leg", in.Leg)
	}
	total, spent := new(big.Int), common.Address{}
	for _, m := range o.Movements {
		if m.From != wallet {
			continue
		}
		switch {
		case in.Leg == "WITHDRAW" && m.Token == vault && (m.To == (common.Address{}) || m.To == vault):
			continue // the shares given up
		case !spends:
			return fmt.Errorf("%s base units of %s leave the wallet for %s; a %s leg takes nothing from it", m.Amount, assetName(m.Token), m.To.Hex(), in.Leg)
		case anyAsset && spent != (common.Address{}) && m.Token != spent,
			!anyAsset && m.Token != asset:
			return fmt.Errorf("%s base units of %s leave the wallet; the %s leg spends only %s", m.Amount, assetName(m.Token), in.Leg, assetName(cmp.Or(asset, spent)))
		case recipient != nil && m.To != *recipient:
			return fmt.Errorf("%s base units of %s go to %s, not to %s", m.Amount, assetName(m.Token), m.To.Hex(), recipient.Hex())
		}
		spent = m.Token
		total.Add(total, m.Amount)
	}
	if spends && (total.Cmp(amount) > 0 || !atMost && total.Cmp(amount) != 0) {
		return fmt.Errorf("%s base units leave the wallet; the %s leg spends %s", total, in.Leg, amount)
	}
	if gains {
		gained := false
		for _, c := range o.Changes() {
			if c.Address == wallet && c.Amount.Cmp(gainAtLeast) >= 0 && (gainAny && c.Token != vault || !gainAny && c.Token == gainAsset) {
				gained = true
			}
		}
		if !gained {
			what := "one asset"
			if !gainAny {
				what = assetName(gainAsset)
			}
			return fmt.Errorf("the wallet does not receive what the %s leg is for: at least %s base units of %s", in.Leg, gainAtLeast, what)
		}
	}
	return checkAllowances(tx, in, wallet, o, amount)
}

// checkAllowances holds the wallet's Approval events to the leg: an APPROVE emits exactly
// its own; any other leg only the allowance of the contract it calls, as it is spent.
func checkAllowances(tx *types.Transaction, in chain.Intent, wallet common.Address, o Outcome, amount *big.Int) error {
	approvals := 0
	for _, a := range o.Approvals {
		if a.Owner != wallet {
			continue
		}
		if in.Leg == "APPROVE" {
			if a.Token != common.HexToAddress(in.Contract) || a.Spender != common.HexToAddress(in.To) || a.Amount.Cmp(amount) != 0 {
				return fmt.Errorf("the wallet allows %s to spend %s of %s; the intent approves %s of %s to %s", a.Spender.Hex(), a.Amount, a.Token.Hex(), amount, in.Contract, in.To)
			}
			approvals++
			continue
		}
		if tx.To() == nil || a.Spender != *tx.To() {
			return fmt.Errorf("the wallet allows %s to spend %s of %s; a %s leg grants nothing", a.Spender.Hex(), a.Amount, a.Token.Hex(), in.Leg)
		}
	}
	if in.Leg == "APPROVE" && approvals != 1 {
		return fmt.Errorf("the approve emits %d Approval events of the wallet, not one", approvals)
	}
	return nil
}

func assetName(token common.Address) string {
	if token == NativeAddress {
		return "the native asset"
	}
	return "the token at " + token.Hex()
}

// Simulate runs an order's legs on the node's latest state, one after another, without
// sending them, and says what each would move (chain.Simulator): what approvers see
// beside the statement. Assets are named by the chain's configuration where it knows
// them.
func (c *Chain) Simulate(ctx context.Context, legs []chain.Leg) (chain.Simulation, error) {
	calls := make([]ethereum.CallMsg, len(legs))
	for i, leg := range legs {
		if err := c.serves(leg.Chain); err != nil {
			return chain.Simulation{}, err
		}
		if !common.IsHexAddress(leg.From) {
			return chain.Simulation{}, fmt.Errorf("evm: the wallet address %q is not an EVM address", leg.From)
		}
		from := common.HexToAddress(leg.From)
		in, err := c.intent(ctx, leg, from)
		if err != nil {
			// A swap's quote is read from the node: its transport error quotes the URL.
			return chain.Simulation{}, fmt.Errorf("evm: the %s leg: %s", leg.Kind, chain.RedactURL(err))
		}
		calls[i] = ethereum.CallMsg{From: from, To: &in.to, Value: in.value, Data: in.data}
	}
	node, ok := c.client.(Simulator)
	if !ok {
		return chain.Simulation{}, ErrCannotSimulate
	}
	block, outcomes, err := Simulate(ctx, node, calls)
	if err != nil {
		return chain.Simulation{}, err
	}
	sim := chain.Simulation{Block: block, Legs: make([]chain.SimulatedLeg, len(legs))}
	for i, o := range outcomes {
		l := chain.SimulatedLeg{Leg: legs[i].Kind, Reverted: o.Reverted, Reason: o.Reason, GasUsed: o.GasUsed, BalanceChanges: []chain.BalanceChange{}}
		for _, ch := range o.Changes() {
			symbol, decimals := ch.Token.Hex(), int32(0)
			if ch.Token == NativeAddress {
				symbol, decimals = c.cfg.NativeAsset, 18
			} else if t, ok := c.cfg.tokenAt(ch.Token); ok {
				symbol, decimals = t.Symbol, t.Decimals
			}
			l.BalanceChanges = append(l.BalanceChanges, chain.BalanceChange{Address: ch.Address.Hex(), Asset: symbol,
				Amount: decimal.NewFromBigInt(ch.Amount, -decimals).String(), BaseUnits: ch.Amount.String()})
		}
		sim.Legs[i] = l
	}
	return sim, nil
}
