package signer

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/opentreasury/treasury/client"
	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/evm"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/chain/solana"
)

// Policy is the signer's own rules (SPEC 3.5a): what it lets its wallet sign, read from
// its own configuration file. The service's word counts for nothing here: the signer
// decodes the transaction from the request's rawUnsignedTx itself and judges that. Deny
// wins over allow, and what is not allowed is refused.
type Policy struct {
	// Chains are the chains the signer signs on, by the name the service gives them.
	Chains map[string]ChainRule `json:"chains"`
	Allow  Rules                `json:"allow"`
	Deny   Rules                `json:"deny"`
	// Approvers, when set, are the signer's own quorum: the approver keys it pins and the
	// approvals each leg needs. The request's intent must then say what the transaction
	// does, and enough pinned keys must have signed it.
	Approvers *ApproverRules `json:"approvers,omitempty"`
	// Callback, when set, is the customer's own rule, asked last before each signature.
	Callback *Callback `json:"callback,omitempty"`

	// mu guards reverts: when each request's transaction first reverted on the node.
	mu      sync.Mutex
	reverts map[string]time.Time
}

// ApproverRules are the approver keys the signer accepts (their ids, schemes and public
// keys as GET /api/v1/approver-keys lists them, checked by whoever pins them) and its
// quorum tiers: a leg needs the most approvals of the tiers it reaches.
type ApproverRules struct {
	Keys  []PinnedKey  `json:"keys"`
	Tiers []QuorumTier `json:"tiers"`
	// RPID, when set, is the relying party (the console's domain) whose passkeys count:
	// a passkey's assertion for another site is refused.
	RPID string `json:"rpId,omitempty"`
	keys map[string]pinned
}

// PinnedKey is an approver key the signer trusts.
type PinnedKey struct {
	ID        string `json:"id"`
	Scheme    string `json:"scheme"`
	PublicKey string `json:"publicKey"`
}

type pinned struct {
	scheme string
	public []byte
}

// QuorumTier requires Approvals distinct pinned keys for a leg that moves at least
// MinAmount base units of Asset ("" for any asset).
type QuorumTier struct {
	Asset     string `json:"asset,omitempty"`
	MinAmount string `json:"minAmount"`
	Approvals int    `json:"approvals"`
	min       *big.Int
}

// ChainRule is what the signer knows of a chain by itself. An EVM chain: its chain id, the
// most a transaction may pay in fees (gas × maxFeePerGas, in wei), and optionally its own
// node, through which it simulates each transaction before signing it. A Solana chain: the
// most a transaction may pay in fees (its signatures' and its priority fee, in lamports).
type ChainRule struct {
	ChainID   uint64 `json:"chainId,omitempty"`
	MaxFeeWei string `json:"maxFeeWei,omitempty"`
	// MaxFeeLamports makes the chain a Solana one.
	MaxFeeLamports string `json:"maxFeeLamports,omitempty"`
	// RPCURL is a node of the signer's own choosing (not the service's): with one, every
	// transaction is run there first (eth_simulateV1) and must move what its intent says
	// and nothing else.
	RPCURL string `json:"rpcUrl,omitempty"`
	maxFee *big.Int
	node   evm.Simulator
}

func (c ChainRule) solana() bool { return c.MaxFeeLamports != "" }

// Rules list destinations and contracts. A destination is an address a transfer pays
// (native, or an ERC-20 transfer's recipient); a contract is an address the transaction
// calls, with the methods allowed (or denied) on it; in Deny, no methods means all.
type Rules struct {
	Destinations []string       `json:"destinations"`
	Contracts    []ContractRule `json:"contracts"`
}

// ContractRule names a contract and methods of it: transfer, approve, swapExactInput,
// deposit, withdraw, claimRewards, borrow, repay, and a batch transfer contract's
// batchTransferToken and batchTransferNative.
type ContractRule struct {
	Address string   `json:"address"`
	Methods []string `json:"methods"`
}

// Refusal is a check that failed: Reason names it (as the refusal posted to the service
// does), Detail says what the signer saw.
type Refusal struct {
	Reason, Detail string
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Detail }

func refusal(reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// unlimited is where an approval stops being an amount: 2^255 and above (the usual
// "unlimited" is 2^256-1).
var unlimited = new(big.Int).Lsh(big.NewInt(1), 255)

// methods are the calls a contract rule may name.
var methods = []string{"transfer", "approve", "swapExactInput", "deposit", "withdraw", "claimRewards", "borrow", "repay",
	"batchTransferToken", "batchTransferNative"}

// LoadPolicy reads a policy file strictly: unknown fields, malformed addresses, unknown
// methods and chains without a fee cap are errors, so that a typo never widens what the
// signer signs.
func LoadPolicy(path string) (*Policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParsePolicy(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParsePolicy reads a policy document as LoadPolicy reads its file: strictly.
func ParsePolicy(doc []byte) (*Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p); err != nil {
		return nil, err
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Policy) check() error {
	if len(p.Chains) == 0 {
		return errors.New("chains: name at least one chain the signer signs on")
	}
	for name, c := range p.Chains {
		if c.solana() {
			fee, ok := new(big.Int).SetString(c.MaxFeeLamports, 10)
			if c.ChainID != 0 || c.MaxFeeWei != "" || c.RPCURL != "" || !ok || fee.Sign() <= 0 || !fee.IsUint64() {
				return fmt.Errorf("chains.%s: a Solana chain has maxFeeLamports (a positive whole number of lamports) and no chainId, maxFeeWei or rpcUrl", name)
			}
			c.maxFee = fee
			p.Chains[name] = c
			continue
		}
		fee, ok := new(big.Int).SetString(c.MaxFeeWei, 10)
		if c.ChainID == 0 || !ok || fee.Sign() <= 0 {
			return fmt.Errorf("chains.%s: needs chainId and maxFeeWei (a positive whole number of wei), or maxFeeLamports for a Solana chain", name)
		}
		if c.RPCURL != "" {
			if u, err := url.Parse(c.RPCURL); err != nil || !slices.Contains([]string{"http", "https", "ws", "wss"}, u.Scheme) || u.Host == "" {
				return fmt.Errorf("chains.%s.rpcUrl: an http(s) or ws(s) URL of the signer's own node", name)
			}
		}
		c.maxFee = fee
		p.Chains[name] = c
	}
	if p.Callback != nil {
		if err := p.Callback.load(); err != nil {
			return err
		}
	}
	if a := p.Approvers; a != nil {
		a.keys = map[string]pinned{}
		seen := map[string]string{}
		for _, k := range a.Keys {
			pub, err := approvers.ParsePublicKey(k.Scheme, k.PublicKey)
			if err != nil || k.ID == "" {
				return fmt.Errorf("approvers.keys: %q: an id and a public key of its scheme (%v)", k.ID, err)
			}
			// One key is one approver: pinned twice, under two ids, it would count twice.
			if other, dup := seen[string(pub)]; dup || a.keys[k.ID].public != nil {
				return fmt.Errorf("approvers.keys: %q repeats the id or the public key of %q", k.ID, cmp.Or(other, k.ID))
			}
			seen[string(pub)] = k.ID
			a.keys[k.ID] = pinned{scheme: k.Scheme, public: pub}
		}
		for i, t := range a.Tiers {
			min, ok := new(big.Int).SetString(t.MinAmount, 10)
			if !ok || min.Sign() < 0 || t.Approvals < 1 || t.Approvals > len(a.keys) {
				return fmt.Errorf("approvers.tiers[%d]: minAmount is a whole number of base units, approvals 1 to the pinned keys' %d", i, len(a.keys))
			}
			a.Tiers[i].min = min
		}
	}
	for _, rules := range []Rules{p.Allow, p.Deny} {
		for _, d := range rules.Destinations {
			if !isAddress(d) {
				return fmt.Errorf("destination %q is not an address", d)
			}
		}
		for _, c := range rules.Contracts {
			if !isAddress(c.Address) {
				return fmt.Errorf("contract %q is not an address", c.Address)
			}
			for _, m := range c.Methods {
				if !slices.Contains(methods, m) {
					return fmt.Errorf("contract %s: unknown method %q (one of %s)", c.Address, m, strings.Join(methods, ", "))
				}
			}
		}
	}
	return nil
}

// isAddress accepts an EVM address or a Solana one, as a wallet's chain writes it.
func isAddress(s string) bool { return common.IsHexAddress(s) || keys.IsSolanaAddress(s) }

// Check judges a signing request by the policy alone, for the wallet at address: nil when
// the signer may sign it, else the first check that failed.
func (p *Policy) Check(r client.SigningRequest, walletID, address string) *Refusal {
	_, f := p.inspect(r, walletID, address)
	return f
}

// inspect is Check, with the EVM transaction it decoded (nil on the simulated chain) for
// the checks that follow it.
func (p *Policy) inspect(r client.SigningRequest, walletID, address string) (*types.Transaction, *Refusal) {
	raw, err := hex.DecodeString(r.RawUnsignedTx)
	if err != nil || len(raw) == 0 {
		return nil, refusal("raw_unsigned_tx_missing", "the request carries no rawUnsignedTx to decode")
	}
	rule, ok := p.Chains[r.Chain]
	if !ok {
		return nil, refusal("chain_not_configured", "the signer has no rule for chain %q", r.Chain)
	}
	if client.IsSolanaTransaction(r) || rule.solana() {
		m, f := p.checkSolana(r, raw, rule, address)
		if f != nil || p.Approvers == nil {
			return nil, f
		}
		return nil, p.Approvers.check(r, func(leg chain.Intent) error { return solana.CheckIntent(m, leg) }, walletID, address)
	}
	if !client.IsEVMTransaction(r) {
		if f := p.checkSimulated(r, raw, walletID); f != nil || p.Approvers == nil {
			return nil, f
		}
		return nil, p.Approvers.check(r, nil, walletID, address)
	}
	tx, hash, err := evm.DecodeUnsigned(raw)
	if err != nil {
		return nil, refusal("undecodable", "%v", err)
	}
	if !strings.EqualFold(hex.EncodeToString(hash[:]), r.Digest) {
		return nil, refusal("digest_mismatch", "the digest %s is not the hash %x of the transaction decoded", r.Digest, hash)
	}
	if f := p.checkEVM(r, tx, rule, address); f != nil || p.Approvers == nil {
		return tx, f
	}
	return tx, p.Approvers.check(r, func(leg chain.Intent) error { return evm.CheckIntent(tx, leg) }, walletID, address)
}

// intentLeg reads the request's intent and the leg of it the request signs: the intent
// names this wallet, on this chain, from its address, and the decoded transaction does
// exactly what that leg says (matches, nil on the simulated chain).
func intentLeg(r client.SigningRequest, matches func(chain.Intent) error, walletID, address string) (chain.Intent, *Refusal) {
	if r.Intent == nil || *r.Intent == "" {
		return chain.Intent{}, refusal("intent_missing", "the request carries no intent to hold the transaction to")
	}
	var st approvers.Statement
	if err := json.Unmarshal([]byte(*r.Intent), &st); err != nil {
		return chain.Intent{}, refusal("intent_mismatch", "the intent does not parse: %v", err)
	}
	if st.Chain != r.Chain || st.WalletID != walletID || !strings.EqualFold(st.From, address) {
		return chain.Intent{}, refusal("intent_mismatch", "the intent is of %s on %s from %s, not this wallet", st.WalletID, st.Chain, st.From)
	}
	// The request's position names its leg (a batch payment's parts are all TRANSFER legs);
	// position 0, or a service that sends none, is read by the leg's name.
	i := slices.IndexFunc(st.Intent, func(in chain.Intent) bool { return in.Leg == r.Leg })
	if r.Position > 0 {
		i = -1
		if r.Position < len(st.Intent) && st.Intent[r.Position].Leg == r.Leg {
			i = r.Position
		}
	}
	if i < 0 {
		return chain.Intent{}, refusal("intent_mismatch", "the intent has no %s leg", r.Leg)
	}
	leg := st.Intent[i]
	if matches != nil {
		if err := matches(leg); err != nil {
			return chain.Intent{}, refusal("intent_mismatch", "the %s leg: %v", r.Leg, err)
		}
	}
	return leg, nil
}

// check holds the request to the signer's own quorum: its intent names this wallet and
// a leg the decoded transaction does exactly (intentLeg), and enough pinned keys signed
// APPROVE on that very intent, none REJECT.
func (a *ApproverRules) check(r client.SigningRequest, matches func(chain.Intent) error, walletID, address string) *Refusal {
	leg, f := intentLeg(r, matches, walletID, address)
	if f != nil {
		return f
	}
	amount, _ := new(big.Int).SetString(leg.Amount, 10)
	need := 0
	for _, t := range a.Tiers {
		if (t.Asset == "" || t.Asset == leg.Asset) && amount != nil && amount.Cmp(t.min) >= 0 {
			need = max(need, t.Approvals)
		}
	}
	approved := map[string]bool{}
	for _, e := range r.Approvals {
		k, ok := a.keys[e.KeyID]
		if !ok || e.Statement != *r.Intent {
			continue
		}
		if !verifies(k, e, a.RPID) {
			continue
		}
		if e.Decision == "REJECT" {
			return refusal("rejected", "pinned approver key %s rejected the order", e.KeyID)
		}
		// Counted by public key: one key is one approver, whatever ids it is shown under.
		approved[string(k.public)] = true
	}
	if len(approved) < need {
		return refusal("quorum_not_met", "the %s leg moves %s base units of %s and needs %d approvals of pinned keys; %d verify", r.Leg, leg.Amount, leg.Asset, need, len(approved))
	}
	return nil
}

// checkEVM judges a decoded EVM transaction, whose hash is the request's digest.
func (p *Policy) checkEVM(r client.SigningRequest, tx *types.Transaction, rule ChainRule, wallet string) *Refusal {
	if tx.ChainId().Cmp(new(big.Int).SetUint64(rule.ChainID)) != 0 {
		return refusal("wrong_chain", "the transaction is for chain id %s, %s is %d", tx.ChainId(), r.Chain, rule.ChainID)
	}
	fee := new(big.Int).Mul(new(big.Int).SetUint64(tx.Gas()), tx.GasFeeCap())
	if fee.Cmp(rule.maxFee) > 0 {
		return refusal("fee_above_cap", "the transaction may pay %s wei in fees, the cap is %s", fee, rule.maxFee)
	}
	if tx.To() == nil {
		return refusal("contract_creation", "the transaction creates a contract")
	}
	to := tx.To().Hex()
	if len(tx.Data()) == 0 {
		return p.destination(to, fmt.Sprintf("%s wei", tx.Value()))
	}
	call, err := evm.DecodeCall(tx.Data())
	if err != nil {
		return refusal("unknown_method", "the call to %s: %v", to, err)
	}
	if f := p.contract(to, call.Method); f != nil {
		return f
	}
	for _, b := range call.Beneficiaries {
		if !strings.EqualFold(b.Hex(), wallet) {
			return refusal("beneficiary_not_wallet", "%s on %s names %s, not the wallet %s, as who gets what it produces", call.Method, to, b.Hex(), wallet)
		}
	}
	if tx.Value().Sign() > 0 && call.Method != "swapExactInput" && call.Method != "batchTransferNative" {
		return refusal("value_with_call", "%s on %s also sends %s wei", call.Method, to, tx.Value())
	}
	switch call.Method {
	case "transfer":
		recipient, amount := call.Args[0].(common.Address), call.Args[1].(*big.Int)
		return p.destination(recipient.Hex(), fmt.Sprintf("%s base units of the token at %s", amount, to))
	case "batchTransferToken", "batchTransferNative":
		return p.batch(call, to, tx.Value())
	case "approve":
		spender, amount := call.Args[0].(common.Address), call.Args[1].(*big.Int)
		if amount.Cmp(unlimited) >= 0 {
			return refusal("unlimited_approve", "approve of %s to %s is unlimited", amount, spender.Hex())
		}
		if !p.allows(p.Allow.Contracts, spender.Hex(), "") || p.denies(spender.Hex(), "") {
			return refusal("spender_not_allowed", "approve lets %s spend the token at %s, and it is no allowed contract", spender.Hex(), to)
		}
	}
	return nil
}

// batch judges a batch payment's call on the batch contract at contract: a token batch's
// token must be allowed for transfer, a native batch must send exactly its amounts' total,
// and every recipient must be an allowed destination, as if each were paid alone.
func (p *Policy) batch(call evm.Call, contract string, value *big.Int) *Refusal {
	var (
		to      []common.Address
		amounts []*big.Int
		what    string
	)
	if call.Method == "batchTransferToken" {
		token := call.Args[0].(common.Address).Hex()
		if f := p.contract(token, "transfer"); f != nil {
			return f
		}
		to, amounts, what = call.Args[1].([]common.Address), call.Args[2].([]*big.Int), "base units of the token at "+token
	} else {
		to, amounts, what = call.Args[0].([]common.Address), call.Args[1].([]*big.Int), "wei"
		total := new(big.Int)
		for _, a := range amounts {
			total.Add(total, a)
		}
		if total.Cmp(value) != 0 {
			return refusal("value_with_call", "%s on %s sends %s wei for amounts totalling %s", call.Method, contract, value, total)
		}
	}
	if len(to) != len(amounts) {
		return refusal("undecodable", "%s on %s lists %d recipients and %d amounts", call.Method, contract, len(to), len(amounts))
	}
	for i := range to {
		if f := p.destination(to[i].Hex(), fmt.Sprintf("recipient %d's %s %s", i, amounts[i], what)); f != nil {
			return f
		}
	}
	return nil
}

// checkSolana judges a Solana message, decoded from the request's bytes: they hash to the
// digest, the wallet alone pays and signs, the fees stay under the chain's cap, and each
// instruction is one the signer reads and allows: a SOL transfer to an allowed destination,
// a token transfer (the mint an allowed contract with transfer) to an allowed destination's
// associated token account, that account's creation, the compute budget.
func (p *Policy) checkSolana(r client.SigningRequest, raw []byte, rule ChainRule, wallet string) (solana.Message, *Refusal) {
	if !rule.solana() || !client.IsSolanaTransaction(r) {
		return solana.Message{}, refusal("wrong_chain", "the request is not a Solana transaction for %s, or %s is not a Solana chain in the signer's rules", r.Chain, r.Chain)
	}
	if sum := sha256.Sum256(raw); !strings.EqualFold(hex.EncodeToString(sum[:]), r.Digest) {
		return solana.Message{}, refusal("digest_mismatch", "the digest %s is not the SHA-256 of the message", r.Digest)
	}
	m, err := solana.DecodeMessage(raw)
	if err != nil {
		return solana.Message{}, refusal("undecodable", "%v", err)
	}
	if m.FeePayer != wallet || m.Signers != 1 {
		return solana.Message{}, refusal("wrong_wallet", "the message is paid by %s with %d signers, not by the wallet %s alone", m.FeePayer, m.Signers, wallet)
	}
	if fee := m.Fee(); fee > rule.maxFee.Uint64() {
		return solana.Message{}, refusal("fee_above_cap", "the transaction may pay %d lamports in fees, the cap is %s", fee, rule.maxFee)
	}
	for _, in := range m.Instructions {
		a := in.Args
		// Only the wallet's own funds move, and it alone pays: not a token account it is a
		// delegate of, nor another payer's.
		if (in.Method == "transfer" && a["from"] != wallet) || (in.Method == "createIdempotent" && a["payer"] != wallet) ||
			(in.Method == "transferChecked" && (a["owner"] != wallet || !solana.IsAssociated(a["source"], wallet, a["mint"]))) {
			return m, refusal("wrong_wallet", "%s.%s moves or spends another account's funds than the wallet's own: %v", in.Program, in.Method, a)
		}
		switch in.Program + "." + in.Method {
		case "system.transfer":
			if f := p.destination(a["to"], a["lamports"]+" lamports"); f != nil {
				return m, f
			}
		case "token.transferChecked", "associatedToken.createIdempotent":
			if f := p.contract(a["mint"], "transfer"); f != nil {
				return m, f
			}
			account, what := a["destination"], a["amount"]+" base units of "+a["mint"]
			if in.Method == "createIdempotent" {
				account, what = a["account"], "a new token account of "+a["mint"]
			}
			owner, ok := solana.AssociatedOwner(account, a["mint"], p.Allow.Destinations)
			if !ok {
				return m, refusal("destination_not_allowed", "%s goes to the token account %s, which is no allowed destination's", what, account)
			}
			if f := p.destination(owner, what); f != nil {
				return m, f
			}
		}
	}
	return m, nil
}

// checkSimulated judges a simulated chain's transaction: the bytes hash to the digest,
// name this wallet and the payload whose hash was approved, and pay an allowed
// destination. It makes no calls the signer could judge, so any other leg is refused.
func (p *Policy) checkSimulated(r client.SigningRequest, raw []byte, walletID string) *Refusal {
	if sum := sha256.Sum256(raw); !strings.EqualFold(hex.EncodeToString(sum[:]), r.Digest) {
		return refusal("digest_mismatch", "the digest %s is not the SHA-256 of the transaction's bytes", r.Digest)
	}
	tx, f := readSimulated(raw, walletID)
	if f != nil {
		return f
	}
	if tx.Leg != "TRANSFER" {
		return refusal("unknown_method", "a %s leg on the simulated chain calls nothing the signer can check", tx.Leg)
	}
	return p.destination(tx.Destination, "the payment")
}

// simulatedTx is a simulated chain's transaction as a signer reads it.
type simulatedTx struct {
	Leg, Destination string
}

// readSimulated reads a simulated chain's transaction and checks that its payload is the
// one its hash names (what the approvers approved), of this wallet.
func readSimulated(text []byte, walletID string) (simulatedTx, *Refusal) {
	var tx struct {
		Leg         string          `json:"leg"`
		Payload     json.RawMessage `json:"payload"`
		PayloadHash string          `json:"payloadHash"`
	}
	var payload struct {
		WalletID    string `json:"walletId"`
		Destination struct {
			Address string `json:"address"`
		} `json:"destination"`
	}
	if json.Unmarshal(text, &tx) != nil || json.Unmarshal(tx.Payload, &payload) != nil {
		return simulatedTx{}, refusal("undecodable", "the transaction's bytes are not the simulated chain's JSON")
	}
	if sum := sha256.Sum256(tx.Payload); hex.EncodeToString(sum[:]) != tx.PayloadHash {
		return simulatedTx{}, refusal("payload_mismatch", "the payload does not hash to its payloadHash")
	}
	if payload.WalletID != walletID {
		return simulatedTx{}, refusal("wrong_wallet", "the transaction is of wallet %s", payload.WalletID)
	}
	return simulatedTx{Leg: tx.Leg, Destination: payload.Destination.Address}, nil
}

// sameAddress compares addresses as their chain does: an EVM address in any case (EIP-55's
// is only a checksum), a Solana one exactly (base58 is case-sensitive: a case variant is
// another key).
func sameAddress(a, b string) bool {
	if common.IsHexAddress(a) && common.IsHexAddress(b) {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// destination judges what a transfer pays to.
func (p *Policy) destination(to, what string) *Refusal {
	if slices.ContainsFunc(p.Deny.Destinations, func(d string) bool { return sameAddress(d, to) }) {
		return refusal("destination_denied", "%s goes to %s, a denied destination", what, to)
	}
	if !slices.ContainsFunc(p.Allow.Destinations, func(d string) bool { return sameAddress(d, to) }) {
		return refusal("destination_not_allowed", "%s goes to %s, which is not an allowed destination", what, to)
	}
	return nil
}

// contract judges a call of method on the contract at address.
func (p *Policy) contract(address, method string) *Refusal {
	if p.denies(address, method) {
		return refusal("contract_denied", "%s on %s is denied", method, address)
	}
	if !p.allows(p.Allow.Contracts, address, method) {
		return refusal("contract_not_allowed", "%s on %s is not allowed", method, address)
	}
	return nil
}

// allows reports whether rules name the contract with method ("" asks for the contract
// alone).
func (p *Policy) allows(rules []ContractRule, address, method string) bool {
	return slices.ContainsFunc(rules, func(c ContractRule) bool {
		return sameAddress(c.Address, address) && (method == "" || slices.Contains(c.Methods, method))
	})
}

// denies reports whether Deny names the contract with method, or with no method at all.
func (p *Policy) denies(address, method string) bool {
	return slices.ContainsFunc(p.Deny.Contracts, func(c ContractRule) bool {
		return sameAddress(c.Address, address) && (len(c.Methods) == 0 || method == "" || slices.Contains(c.Methods, method))
	})
}

// verifies says whether a decision's evidence is signed by a pinned key over its
// statement: a passkey's WebAuthn assertion whose challenge is the decision's digest, or
// any other key's signature of it.
func verifies(k pinned, e approvers.Evidence, rpID string) bool {
	digest := approvers.DecisionDigest(e.Decision, []byte(e.Statement))
	if e.ClientDataJSON != "" {
		_, err := approvers.VerifyAssertion(k.public, digest, rpID,
			approvers.Assertion{AuthenticatorData: e.AuthenticatorData, ClientDataJSON: e.ClientDataJSON, Signature: e.Signature})
		return k.scheme == approvers.P256 && err == nil
	}
	sig, err := base64.StdEncoding.DecodeString(e.Signature)
	return err == nil && approvers.Verify(k.scheme, k.public, digest, sig) == nil
}
