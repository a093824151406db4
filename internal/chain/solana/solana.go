// Package solana is the chain adapter of Solana: SOL transfers and SPL TransferChecked
// over Solana's JSON-RPC (solana-go), each a transaction whose message the wallet's own
// ed25519 key signs outside the service.
package solana

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	sol "github.com/gagliardetto/solana-go"
	computebudget "github.com/gagliardetto/solana-go/programs/compute-budget"
	"github.com/gagliardetto/solana-go/programs/system"
	"github.com/gagliardetto/solana-go/programs/token"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/gagliardetto/solana-go/rpc/jsonrpc"
	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/chain"
)

// SOL is the chain's own coin: 9 decimals (lamports).
const (
	NativeAsset    = "SOL"
	NativeDecimals = 9
)

// The compute a transaction may use: a SOL transfer needs a few hundred units; creating
// the recipient's token account and transferring to it about 30,000 on mainnet.
const (
	solTransferUnits   = 1_000
	tokenTransferUnits = 60_000
	// maxTransactionSize is a transaction's most bytes on the wire; ed25519SignatureSize
	// each signature's.
	maxTransactionSize   = 1232
	ed25519SignatureSize = 64
	// lamportsPerSignature is the base fee of each signature.
	lamportsPerSignature = 5_000
	// tokenAccountSize is an SPL token account's size, for the rent a new one costs.
	tokenAccountSize = 165
)

// Chain is the Solana chain over one node.
type Chain struct {
	cfg    Config
	client *rpc.Client
	now    func() time.Time
}

// Dial connects to the node, checks that it serves the configured cluster (its genesis
// hash, when configured) and that every mint has the configured decimals.
func Dial(ctx context.Context, cfg Config) (*Chain, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	httpClient := &http.Client{Timeout: 15 * time.Second}
	c := &Chain{cfg: cfg, now: time.Now,
		client: rpc.NewWithCustomRPCClient(jsonrpc.NewClientWithOpts(cfg.RPCURL, &jsonrpc.RPCClientOpts{HTTPClient: httpClient}))}
	genesis, err := c.client.GetGenesisHash(ctx)
	if err != nil {
		return nil, fmt.Errorf("solana: %s: reading the node's genesis hash: %s", cfg.Name, chain.RedactURL(err))
	}
	if cfg.GenesisHash != "" && genesis.String() != cfg.GenesisHash {
		return nil, fmt.Errorf("solana: %s: the node serves the cluster of genesis %s, the configuration says %s", cfg.Name, genesis, cfg.GenesisHash)
	}
	for _, t := range cfg.Tokens {
		supply, err := c.client.GetTokenSupply(ctx, sol.MustPublicKeyFromBase58(t.Mint), rpc.CommitmentConfirmed)
		if err != nil {
			return nil, fmt.Errorf("solana: %s: reading %s's mint %s: %s", cfg.Name, t.Symbol, t.Mint, chain.RedactURL(err))
		}
		if supply.Value == nil || int32(supply.Value.Decimals) != t.Decimals {
			return nil, fmt.Errorf("solana: %s: %s's mint %s does not have the configured %d decimals", cfg.Name, t.Symbol, t.Mint, t.Decimals)
		}
	}
	return c, nil
}

// Config returns the chain's configuration, defaults filled in.
func (c *Chain) Config() Config { return c.cfg }

func (c *Chain) serves(chainName string) error {
	if chainName != c.cfg.Name {
		return fmt.Errorf("%w: the %s adapter does not serve %q", chain.ErrUnknownChain, c.cfg.Name, chainName)
	}
	return nil
}

// PublicKey reads a base58 address.
func PublicKey(address string) (sol.PublicKey, error) {
	k, err := sol.PublicKeyFromBase58(address)
	if err != nil {
		return sol.PublicKey{}, fmt.Errorf("solana: %q is not a base58 public key", address)
	}
	return k, nil
}

// Units converts a decimal amount to base units exactly (chain.BaseUnits), and refuses one
// beyond the u64 Solana carries.
func Units(amount decimal.Decimal, decimals int32) (uint64, error) {
	units, err := chain.BaseUnits(amount, decimals)
	if err != nil {
		return 0, err
	}
	if !units.IsUint64() {
		return 0, fmt.Errorf("%w: %s in base units of %d decimals is more than Solana's 64-bit amounts carry", chain.ErrAmountTooLarge, amount, decimals)
	}
	return units.Uint64(), nil
}

// Balances reads the address's SOL and, for each configured mint, the sum of its token
// accounts of that mint.
func (c *Chain) Balances(ctx context.Context, chainName, address string) (map[string]decimal.Decimal, error) {
	if err := c.serves(chainName); err != nil {
		return nil, err
	}
	owner, err := PublicKey(address)
	if err != nil {
		return nil, err
	}
	lamports, err := c.client.GetBalance(ctx, owner, rpc.CommitmentConfirmed)
	if err != nil {
		return nil, fmt.Errorf("solana: getBalance: %s", chain.RedactURL(err))
	}
	out := map[string]decimal.Decimal{NativeAsset: decimal.NewFromUint64(lamports.Value).Shift(-NativeDecimals)}
	for _, t := range c.cfg.Tokens {
		units, err := c.tokenBalance(ctx, owner, sol.MustPublicKeyFromBase58(t.Mint))
		if err != nil {
			return nil, err
		}
		out[t.Symbol] = decimal.NewFromUint64(units).Shift(-t.Decimals)
	}
	return out, nil
}

// tokenBalance sums an owner's token accounts of a mint, in base units.
func (c *Chain) tokenBalance(ctx context.Context, owner, mint sol.PublicKey) (uint64, error) {
	accounts, err := c.client.GetTokenAccountsByOwner(ctx, owner, &rpc.GetTokenAccountsConfig{Mint: &mint},
		&rpc.GetTokenAccountsOpts{Commitment: rpc.CommitmentConfirmed, Encoding: sol.EncodingBase64})
	if err != nil {
		return 0, fmt.Errorf("solana: getTokenAccountsByOwner: %s", chain.RedactURL(err))
	}
	var total uint64
	for _, a := range accounts.Value {
		if a.Account.Data == nil {
			continue
		}
		amount, err := tokenAmount(a.Account.Data.GetBinary())
		if err != nil {
			return 0, err
		}
		total += amount
	}
	return total, nil
}

// tokenAmount reads an SPL token account's amount: a little-endian u64 after its mint and
// owner.
func tokenAmount(data []byte) (uint64, error) {
	if len(data) < 72 {
		return 0, fmt.Errorf("solana: a token account of %d bytes is too short", len(data))
	}
	return binary.LittleEndian.Uint64(data[64:72]), nil
}

// Describe says what a payment moves: SOL to its destination, or a mint's tokens to the
// destination's associated token account through TransferChecked. Solana has no venues for
// trades, Earn or Borrow here.
func (c *Chain) Describe(leg chain.Leg) (chain.Intent, error) {
	t, isToken, units, err := c.transfer(leg)
	if err != nil {
		return chain.Intent{}, err
	}
	in := chain.Intent{Leg: leg.Kind, To: leg.To, Asset: leg.Asset, Amount: fmt.Sprint(units)}
	if isToken {
		in.Contract, in.Method = t.Mint, "transferChecked"
	}
	if len(leg.Recipients) > 0 {
		payees, total, err := payeesOf(leg, t)
		if err != nil {
			return chain.Intent{}, err
		}
		in.To, in.Amount = "", fmt.Sprint(total)
		for _, p := range payees {
			in.Recipients = append(in.Recipients, chain.IntentPayee{To: p.to.String(), Amount: fmt.Sprint(p.units)})
		}
	}
	return in, nil
}

// payee is one recipient of a leg: its key and what it is paid in base units.
type payee struct {
	to    sol.PublicKey
	units uint64
}

// payeesOf are who a leg pays, in order, and their total: its destination, or a batch
// part's recipients.
func payeesOf(leg chain.Leg, t Token) ([]payee, uint64, error) {
	if len(leg.Recipients) == 0 {
		to, err := PublicKey(leg.To)
		if err != nil {
			return nil, 0, err
		}
		units, err := Units(leg.Amount, t.Decimals)
		return []payee{{to, units}}, units, err
	}
	out, total := make([]payee, len(leg.Recipients)), uint64(0)
	for i, r := range leg.Recipients {
		to, err := PublicKey(r.To)
		if err != nil {
			return nil, 0, fmt.Errorf("recipient %d: %w", i, err)
		}
		units, err := Units(r.Amount, t.Decimals)
		if err != nil {
			return nil, 0, fmt.Errorf("recipient %d: %w", i, err)
		}
		if total+units < total {
			return nil, 0, fmt.Errorf("%w: the part's total does not fit a u64", chain.ErrAmountTooLarge)
		}
		out[i], total = payee{to, units}, total+units
	}
	return out, total, nil
}

// transfer reads what a leg moves on this chain: the token (false for SOL) and the amount
// in its base units. Only payments run on Solana here.
func (c *Chain) transfer(leg chain.Leg) (t Token, isToken bool, units uint64, err error) {
	if err := c.serves(leg.Chain); err != nil {
		return Token{}, false, 0, err
	}
	if leg.Kind != "TRANSFER" {
		return Token{}, false, 0, fmt.Errorf("%w: %s has no venue for %s legs", chain.ErrUnsupportedAsset, c.cfg.Name, leg.Kind)
	}
	if t, isToken, err = c.cfg.token(leg.Asset); err != nil {
		return Token{}, false, 0, err
	}
	units, err = Units(leg.Amount, t.Decimals)
	return t, isToken, units, err
}

// Instruction is one instruction of a transaction in words, for the signer.
type Instruction struct {
	Program string            `json:"program"`
	Method  string            `json:"method"`
	Args    map[string]string `json:"args,omitempty"`
}

// Fields is a transaction in the readable form a signing request carries. Message is the
// base64 of the serialized message, the bytes the wallet signs and the runtime verifies;
// the rest says what it holds.
type Fields struct {
	Type                 string        `json:"type"`
	FeePayer             string        `json:"feePayer"`
	RecentBlockhash      string        `json:"recentBlockhash"`
	LastValidBlockHeight uint64        `json:"lastValidBlockHeight"`
	ComputeUnitLimit     uint32        `json:"computeUnitLimit"`
	ComputeUnitPrice     uint64        `json:"computeUnitPriceMicroLamports"`
	Instructions         []Instruction `json:"instructions"`
	Message              string        `json:"message"`
	OrderID              string        `json:"orderId"`
	Leg                  string        `json:"leg"`
	Position             int           `json:"position"`
}

// FieldsType marks a signing request's readable transaction as a Solana one.
const FieldsType = "solana"

// Prepare builds the leg's transaction on a fresh blockhash: a compute budget with a
// priority fee, then a SOL transfer, or the recipient's token account created if missing
// (CreateIdempotent) and a TransferChecked. It checks that the wallet holds the amount and
// the fees (and the rent of a new token account). The transaction carries no account
// nonce: its blockhash bounds its life instead, so a retried step builds a new one.
func (c *Chain) Prepare(ctx context.Context, leg chain.Leg) (chain.Draft, error) {
	t, isToken, units, err := c.transfer(leg)
	if err != nil {
		return chain.Draft{}, err
	}
	if leg.Scheme != "" && leg.Scheme != chain.Ed25519 {
		return chain.Draft{}, fmt.Errorf("solana: transactions are signed with ed25519, the wallet signs with %s", leg.Scheme)
	}
	from, err := PublicKey(leg.From)
	if err != nil {
		return chain.Draft{}, err
	}
	payees, total, err := payeesOf(leg, t)
	if err != nil {
		return chain.Draft{}, err
	}
	if total != units {
		return chain.Draft{}, fmt.Errorf("solana: the leg's amount %s is not its recipients' total", leg.Amount)
	}
	limit := uint32(solTransferUnits * len(payees))
	if isToken {
		limit = uint32(min(tokenTransferUnits*len(payees), maxComputeUnits))
	}
	price, err := c.unitPrice(ctx, limit)
	if err != nil {
		return chain.Draft{}, err
	}
	fee := lamportsPerSignature + priorityLamports(limit, price)
	held, err := c.client.GetBalance(ctx, from, rpc.CommitmentConfirmed)
	if err != nil {
		return chain.Draft{}, fmt.Errorf("solana: getBalance: %s", chain.RedactURL(err))
	}
	budget := []sol.Instruction{
		computebudget.NewSetComputeUnitLimitInstruction(limit).Build(),
		computebudget.NewSetComputeUnitPriceInstruction(price).Build(),
	}
	var instructions []sol.Instruction
	if !isToken {
		if held.Value < fee || held.Value-fee < units {
			return chain.Draft{}, fmt.Errorf("%w: %s holds %s SOL, the transfer needs %s (its amount and %d lamports of fees)", chain.ErrInsufficientFunds,
				leg.From, lamportsText(held.Value), lamportsText(units+fee), fee)
		}
		instructions = budget
		for _, p := range payees {
			instructions = append(instructions, system.NewTransferInstruction(p.units, from, p.to).Build())
		}
	} else {
		mint := sol.MustPublicKeyFromBase58(t.Mint)
		source, _, err := sol.FindAssociatedTokenAddress(from, mint)
		if err != nil {
			return chain.Draft{}, err
		}
		tokens, err := c.tokenBalanceOf(ctx, source)
		if err != nil {
			return chain.Draft{}, err
		}
		if tokens < units {
			return chain.Draft{}, fmt.Errorf("%w: %s holds %s %s, the transfer sends %s", chain.ErrInsufficientFunds, leg.From,
				decimal.NewFromUint64(tokens).Shift(-t.Decimals), t.Symbol, leg.Amount)
		}
		instructions = budget
		rent, rented := uint64(0), map[sol.PublicKey]bool{}
		for _, p := range payees {
			destination, _, err := sol.FindAssociatedTokenAddress(p.to, mint)
			if err != nil {
				return chain.Draft{}, err
			}
			if !rented[destination] {
				rented[destination] = true
				r, err := c.newAccountRent(ctx, destination)
				if err != nil {
					return chain.Draft{}, err
				}
				rent += r
			}
			instructions = append(instructions, createIdempotent(from, destination, p.to, mint),
				token.NewTransferCheckedInstruction(p.units, uint8(t.Decimals), source, mint, destination, from, nil).Build())
		}
		if held.Value < fee+rent {
			return chain.Draft{}, fmt.Errorf("%w: %s holds %s SOL, the transfer's fees and the recipient's new token account need %s", chain.ErrInsufficientFunds,
				leg.From, lamportsText(held.Value), lamportsText(fee+rent))
		}
	}
	// A blockhash the cluster has confirmed: one only processed may belong to a fork that
	// never lands, and a transaction on it never would either.
	latest, err := c.client.GetLatestBlockhash(ctx, rpc.CommitmentConfirmed)
	if err != nil {
		return chain.Draft{}, fmt.Errorf("solana: getLatestBlockhash: %s", chain.RedactURL(err))
	}
	tx, err := sol.NewTransaction(instructions, latest.Value.Blockhash, sol.TransactionPayer(from))
	if err != nil {
		return chain.Draft{}, err
	}
	message, err := tx.Message.MarshalBinary()
	if err != nil {
		return chain.Draft{}, err
	}
	// One signature (a count byte and 64 bytes) and the message make the transaction.
	if size := 1 + ed25519SignatureSize + len(message); size > maxTransactionSize {
		return chain.Draft{}, fmt.Errorf("%w: the transaction would be %d bytes, over Solana's %d: its part pays too many recipients", chain.ErrUnsupportedAsset,
			size, maxTransactionSize)
	}
	// The readable instructions are read back from the message's bytes, as a signer reads
	// them: what the request says is what it holds, by construction.
	decoded, err := DecodeMessage(message)
	if err != nil {
		return chain.Draft{}, err
	}
	f := Fields{Type: FieldsType, FeePayer: from.String(), RecentBlockhash: latest.Value.Blockhash.String(),
		LastValidBlockHeight: latest.Value.LastValidBlockHeight, ComputeUnitLimit: limit, ComputeUnitPrice: price,
		Instructions: decoded.Instructions, Message: base64.StdEncoding.EncodeToString(message),
		OrderID: leg.OrderID, Leg: leg.Kind, Position: leg.Position}
	raw, err := json.Marshal(f)
	if err != nil {
		return chain.Draft{}, err
	}
	digest := sha256.Sum256(message)
	unsigned := chain.Unsigned{Scheme: chain.Ed25519, Fields: raw, Raw: message, Digest: hex.EncodeToString(digest[:])}
	return chain.Draft{Chain: c.cfg.Name, Scheme: chain.Ed25519,
		Seal: func(uint64) (chain.Unsigned, error) { return unsigned, nil }}, nil
}

// createIdempotent is the associated token account program's CreateIdempotent: it makes
// the owner's account of the mint, and does nothing when it exists already.
func createIdempotent(payer, account, owner, mint sol.PublicKey) sol.Instruction {
	return sol.NewInstruction(sol.SPLAssociatedTokenAccountProgramID, sol.AccountMetaSlice{
		sol.Meta(payer).WRITE().SIGNER(),
		sol.Meta(account).WRITE(),
		sol.Meta(owner),
		sol.Meta(mint),
		sol.Meta(sol.SystemProgramID),
		sol.Meta(sol.TokenProgramID),
	}, []byte{1})
}

// unitPrice is what a compute unit is offered at: the node's recent median, at least the
// configured floor, and no more than the cap allows for limit units.
func (c *Chain) unitPrice(ctx context.Context, limit uint32) (uint64, error) {
	price := c.cfg.PriorityFeeMicroLamports
	recent, err := c.client.GetRecentPrioritizationFees(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("solana: getRecentPrioritizationFees: %s", chain.RedactURL(err))
	}
	if len(recent) > 0 {
		fees := make([]uint64, 0, len(recent))
		for _, r := range recent {
			fees = append(fees, r.PrioritizationFee)
		}
		slices.Sort(fees)
		price = max(price, fees[len(fees)/2])
	}
	if ceiling := c.cfg.MaxPriorityFeeLamports * 1_000_000 / uint64(limit); price > ceiling {
		price = ceiling
	}
	return price, nil
}

// priorityLamports is what a transaction pays for its priority: its compute limit at its
// price, rounded up to a lamport as the runtime rounds it.
func priorityLamports(limit uint32, microLamports uint64) uint64 {
	return (uint64(limit)*microLamports + 999_999) / 1_000_000
}

func lamportsText(v uint64) string { return decimal.NewFromUint64(v).Shift(-NativeDecimals).String() }

// tokenBalanceOf reads one token account's amount; an account that does not exist holds 0.
func (c *Chain) tokenBalanceOf(ctx context.Context, account sol.PublicKey) (uint64, error) {
	info, err := c.client.GetAccountInfoWithOpts(ctx, account, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentConfirmed, Encoding: sol.EncodingBase64})
	if errors.Is(err, rpc.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("solana: getAccountInfo: %s", chain.RedactURL(err))
	}
	if info.Value == nil || info.Value.Data == nil {
		return 0, nil
	}
	return tokenAmount(info.Value.Data.GetBinary())
}

// newAccountRent is the rent a token account costs its payer when it does not exist yet.
func (c *Chain) newAccountRent(ctx context.Context, account sol.PublicKey) (uint64, error) {
	info, err := c.client.GetAccountInfoWithOpts(ctx, account, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentConfirmed, Encoding: sol.EncodingBase64})
	if err == nil && info.Value != nil {
		return 0, nil
	}
	if err != nil && !errors.Is(err, rpc.ErrNotFound) {
		return 0, fmt.Errorf("solana: getAccountInfo: %s", chain.RedactURL(err))
	}
	rent, err := c.client.GetMinimumBalanceForRentExemption(ctx, tokenAccountSize, rpc.CommitmentConfirmed)
	if err != nil {
		return 0, fmt.Errorf("solana: getMinimumBalanceForRentExemption: %s", chain.RedactURL(err))
	}
	return rent, nil
}

// signed assembles the transaction a signing request described, with its signature, after
// checking that its message is the one whose digest was signed and that the fee payer's
// key made the signature. Its id on the chain is the signature itself.
func (c *Chain) signed(stx chain.SignedTx) (raw []byte, id sol.Signature, err error) {
	if err := c.serves(stx.Chain); err != nil {
		return nil, sol.Signature{}, err
	}
	var f Fields
	if err := json.Unmarshal(stx.Fields, &f); err != nil || f.Type != FieldsType {
		return nil, sol.Signature{}, fmt.Errorf("solana: the signing request's transaction is not a Solana one")
	}
	message, err := base64.StdEncoding.DecodeString(f.Message)
	if err != nil {
		return nil, sol.Signature{}, fmt.Errorf("solana: the transaction's message is not base64: %w", err)
	}
	if sum := sha256.Sum256(message); !strings.EqualFold(hex.EncodeToString(sum[:]), stx.Digest) {
		return nil, sol.Signature{}, fmt.Errorf("solana: the message does not hash to the signed digest")
	}
	payer, err := PublicKey(f.FeePayer)
	if err != nil {
		return nil, sol.Signature{}, err
	}
	if len(stx.Signature) != ed25519.SignatureSize || !ed25519.Verify(ed25519.PublicKey(payer[:]), message, stx.Signature) {
		return nil, sol.Signature{}, fmt.Errorf("solana: the signature is not the fee payer's (%s) over the message", f.FeePayer)
	}
	copy(id[:], stx.Signature)
	// One signature (the fee payer's): its count as a compact-u16, the signature, the message.
	raw = append(append([]byte{1}, stx.Signature...), message...)
	return raw, id, nil
}

// Broadcast sends the signed transaction. The chain deduplicates by signature, so sending
// it again sends nothing new; the answer is its signature, the transaction's id.
func (c *Chain) Broadcast(ctx context.Context, stx chain.SignedTx) (string, error) {
	raw, id, err := c.signed(stx)
	if err != nil {
		return "", err
	}
	// Preflight is skipped: a transaction that fails lands with its error, as a revert does
	// on an EVM chain, instead of being refused where no status would record why.
	_, err = c.client.SendRawTransactionWithOpts(ctx, raw, rpc.TransactionOpts{SkipPreflight: true})
	if err != nil {
		if _, found, kerr := c.Known(ctx, stx); kerr == nil && found {
			return id.String(), nil
		}
		if isBlockhashNotFound(err) {
			// A node that checks the blockhash anyway refuses what, without preflight, a
			// leader would drop: either way the transaction is out, and it lapses, which
			// has it built again (Lapsed). Retrying the send would never succeed. (A blockhash
			// too new for a lagging node lapses the same way: later, never twice.)
			return id.String(), nil
		}
		return "", fmt.Errorf("solana: sending %s: %s", id, chain.RedactURL(err))
	}
	return id.String(), nil
}

func isBlockhashNotFound(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "blockhash not found")
}

// Lapsed reports that the transaction can never land: the finalized block height is past
// its blockhash's last valid block height (by lapseMargin blocks), and the chain has no
// status for it, from a node at least as far on as the one that gave the height. They are
// read in that order: a status read first could miss a landing made before the height was
// read. A blockhash dead at the finalized block is dead on every fork that can follow it.
// The node must keep transaction history (searchTransactionHistory), as RPC providers do.
func (c *Chain) Lapsed(ctx context.Context, chainName, hash string, fields json.RawMessage) (bool, error) {
	if err := c.serves(chainName); err != nil {
		return false, err
	}
	var f Fields
	if err := json.Unmarshal(fields, &f); err != nil || f.Type != FieldsType || f.LastValidBlockHeight == 0 {
		return false, fmt.Errorf("solana: the transaction %s has no readable Solana fields", hash)
	}
	id, err := sol.SignatureFromBase58(hash)
	if err != nil {
		return false, fmt.Errorf("solana: %q is not a transaction signature", hash)
	}
	finalized, err := c.client.GetEpochInfo(ctx, rpc.CommitmentFinalized)
	if err != nil {
		return false, fmt.Errorf("solana: getEpochInfo: %s", chain.RedactURL(err))
	}
	if finalized.BlockHeight <= f.LastValidBlockHeight+lapseMargin {
		return false, nil
	}
	st, seenAt, err := c.status(ctx, id)
	if err != nil {
		return false, err
	}
	// Behind a load balancer the status may come from a node behind the one that gave the
	// height, one that has not seen the block the transaction is in: ask again later.
	if seenAt < finalized.AbsoluteSlot {
		return false, nil
	}
	return st == nil, nil
}

// lapseMargin is how many blocks past its last valid one a transaction's blockhash must be
// dead, at the finalized block, before it is taken for lapsed: slack for a runtime that
// counts the last block in.
const lapseMargin = 2

// Known looks the transaction up by its signature.
func (c *Chain) Known(ctx context.Context, stx chain.SignedTx) (string, bool, error) {
	_, id, err := c.signed(stx)
	if err != nil {
		return "", false, err
	}
	st, _, err := c.status(ctx, id)
	if err != nil {
		return "", false, err
	}
	if st == nil {
		return "", false, nil
	}
	return id.String(), true, nil
}

// status reads one signature's status, and the slot of the node that answered.
func (c *Chain) status(ctx context.Context, id sol.Signature) (st *rpc.SignatureStatusesResult, seenAt uint64, err error) {
	out, err := c.client.GetSignatureStatuses(ctx, true, id)
	if err != nil {
		return nil, 0, fmt.Errorf("solana: getSignatureStatuses: %s", chain.RedactURL(err))
	}
	if len(out.Value) != 1 {
		return nil, 0, fmt.Errorf("solana: getSignatureStatuses answered %d statuses for one signature", len(out.Value))
	}
	return out.Value[0], out.Context.Slot, nil
}

// Status reads the transaction's signature status: pending until it reaches the configured
// commitment, then confirmed, or failed with the program's error.
func (c *Chain) Status(ctx context.Context, chainName, hash string) (chain.TxStatus, error) {
	if err := c.serves(chainName); err != nil {
		return chain.TxStatus{}, err
	}
	id, err := sol.SignatureFromBase58(hash)
	if err != nil {
		return chain.TxStatus{}, fmt.Errorf("solana: %q is not a transaction signature", hash)
	}
	st, _, err := c.status(ctx, id)
	if err != nil {
		return chain.TxStatus{}, err
	}
	slot := time.Duration(c.cfg.SlotTime)
	if st == nil {
		return chain.TxStatus{State: chain.TxPending, Expected: c.now().Add(slot)}, nil
	}
	depth := 32 // a finalized status carries no count: it is rooted.
	if st.Confirmations != nil {
		depth = int(*st.Confirmations)
	}
	// A failure counts only at the configured commitment, as a success does: one seen on a
	// fork that is dropped may still land, and succeed, on the chain that stays.
	level, known := commitments[string(st.ConfirmationStatus)]
	if !known || level < commitments[c.cfg.Commitment] {
		wait := slot
		if c.cfg.Commitment == "finalized" {
			wait = time.Duration(max(32-depth, 1)) * slot
		}
		return chain.TxStatus{State: chain.TxPending, Confirmations: depth, Expected: c.now().Add(wait)}, nil
	}
	if st.Err != nil {
		return chain.TxStatus{State: chain.TxFailed, Confirmations: depth, Reason: FailureReason(st.Err)}, nil
	}
	return chain.TxStatus{State: chain.TxConfirmed, Confirmations: max(depth, 1)}, nil
}

// tokenErrors names the SPL token program's errors by their custom code.
var tokenErrors = map[float64]string{
	0: "not rent exempt", 1: "insufficient funds", 2: "invalid mint", 3: "mint mismatch", 4: "owner does not match",
	13: "account not associated with this mint", 17: "account is frozen", 18: "mint decimals mismatch",
}

// FailureReason says in words why a transaction failed, from the error a signature status
// carries ({"InstructionError":[2,{"Custom":17}]} and the like).
func FailureReason(err any) string {
	text, _ := json.Marshal(err)
	if m, ok := err.(map[string]any); ok {
		if ie, ok := m["InstructionError"].([]any); ok && len(ie) == 2 {
			idx, _ := ie[0].(float64)
			if inner, ok := ie[1].(map[string]any); ok {
				if code, ok := inner["Custom"].(float64); ok {
					name := tokenErrors[code]
					if name == "" {
						name = "custom program error"
					}
					return fmt.Sprintf("failed: instruction %d: %s (custom program error 0x%x)", int(idx), name, int(code))
				}
			}
			return fmt.Sprintf("failed: instruction %d: %s", int(idx), compact(ie[1]))
		}
	}
	return "failed: " + string(text)
}

func compact(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
