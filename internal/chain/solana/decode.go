package solana

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	bin "github.com/gagliardetto/binary"
	sol "github.com/gagliardetto/solana-go"

	"github.com/opentreasury/treasury/internal/chain"
)

// Message is what a signer reads from a transaction message's own bytes before it signs,
// instead of trusting the readable fields beside them.
type Message struct {
	// FeePayer is the account that pays and signs: the wallet.
	FeePayer string
	// Signers counts the signatures the message needs.
	Signers         int
	RecentBlockhash string
	// Instructions are the message's instructions in words, in order: the same words a
	// signing request's readable fields carry, read here from the bytes.
	Instructions []Instruction
	// ComputeUnitLimit and ComputeUnitPrice are the compute budget's (0 when unset).
	ComputeUnitLimit uint32
	ComputeUnitPrice uint64
	limitSet         bool
}

// The runtime's compute limits: a message that sets none gets the default for each of its
// other instructions, and no message gets more than the most.
const (
	defaultUnitsPerInstruction = 200_000
	maxComputeUnits            = 1_400_000
)

// Fee is the most the message can cost its fee payer in fees, in lamports, as the runtime
// charges it: a signature's fee for each signer and the priority fee, the compute limit
// (the default when unset, never above the most) at its price, rounded up to a lamport.
// It saturates rather than wraps.
func (m Message) Fee() uint64 {
	limit := uint64(m.ComputeUnitLimit)
	if !m.limitSet {
		limit = 0
		for _, in := range m.Instructions {
			if in.Program != "computeBudget" {
				limit += defaultUnitsPerInstruction
			}
		}
	}
	limit = min(limit, maxComputeUnits)
	hi, micro := bits.Mul64(limit, m.ComputeUnitPrice)
	if hi != 0 {
		return math.MaxUint64
	}
	priority := micro / 1_000_000
	if micro%1_000_000 != 0 {
		priority++
	}
	signatures := uint64(m.Signers) * lamportsPerSignature
	if priority > math.MaxUint64-signatures {
		return math.MaxUint64
	}
	return signatures + priority
}

// DecodeMessage reads a serialized transaction message and each of its instructions. Only
// the instructions this service builds decode (compute budget, System transfer, associated
// token account CreateIdempotent, SPL Token TransferChecked): any other is an error, as a
// signer must not sign what it cannot read.
func DecodeMessage(raw []byte) (Message, error) {
	var m sol.Message
	dec := bin.NewBinDecoder(raw)
	if err := m.UnmarshalWithDecoder(dec); err != nil {
		return Message{}, fmt.Errorf("solana: the message does not decode: %w", err)
	}
	if dec.HasRemaining() {
		return Message{}, fmt.Errorf("solana: the message has %d bytes after its end", dec.Remaining())
	}
	if len(m.AccountKeys) == 0 {
		return Message{}, fmt.Errorf("solana: the message names no account")
	}
	if m.IsVersioned() && len(m.AddressTableLookups) > 0 {
		return Message{}, fmt.Errorf("solana: the message loads accounts from lookup tables, which a signer cannot read offline")
	}
	out := Message{FeePayer: m.AccountKeys[0].String(), Signers: int(m.Header.NumRequiredSignatures), RecentBlockhash: m.RecentBlockhash.String()}
	for n, in := range m.Instructions {
		program, err := m.ResolveProgramIDIndex(in.ProgramIDIndex)
		if err != nil {
			return Message{}, fmt.Errorf("solana: instruction %d calls no program the message names: %w", n, err)
		}
		accounts := make([]string, len(in.Accounts))
		for i, a := range in.Accounts {
			if int(a) >= len(m.AccountKeys) {
				return Message{}, fmt.Errorf("solana: instruction %d names account %d of %d", n, a, len(m.AccountKeys))
			}
			accounts[i] = m.AccountKeys[a].String()
		}
		w, err := readInstruction(program, accounts, in.Data)
		if err != nil {
			return Message{}, fmt.Errorf("solana: instruction %d: %w", n, err)
		}
		if w.Program == "computeBudget" && slices.ContainsFunc(out.Instructions, func(o Instruction) bool { return o.Method == w.Method }) {
			// The runtime refuses a message that sets its budget twice.
			return Message{}, fmt.Errorf("solana: instruction %d: %s a second time", n, w.Method)
		}
		switch w.Method {
		case "setComputeUnitLimit":
			limit, _ := strconv.ParseUint(w.Args["units"], 10, 32)
			out.ComputeUnitLimit, out.limitSet = uint32(limit), true
		case "setComputeUnitPrice":
			out.ComputeUnitPrice, _ = strconv.ParseUint(w.Args["microLamports"], 10, 64)
		}
		out.Instructions = append(out.Instructions, w)
	}
	return out, nil
}

// readInstruction puts one instruction in words, from its program, accounts and data.
func readInstruction(program sol.PublicKey, accounts []string, data []byte) (Instruction, error) {
	// Exactly the accounts the service's instruction names: more would make it another one
	// (a token transfer's extra accounts are a multisig's signers).
	need := func(n int) error {
		if len(accounts) != n {
			return fmt.Errorf("%d accounts, where the service's instruction has %d", len(accounts), n)
		}
		return nil
	}
	switch {
	case program.Equals(sol.ComputeBudget):
		switch {
		case len(data) == 5 && data[0] == 2:
			return Instruction{Program: "computeBudget", Method: "setComputeUnitLimit",
				Args: map[string]string{"units": fmt.Sprint(binary.LittleEndian.Uint32(data[1:]))}}, nil
		case len(data) == 9 && data[0] == 3:
			return Instruction{Program: "computeBudget", Method: "setComputeUnitPrice",
				Args: map[string]string{"microLamports": fmt.Sprint(binary.LittleEndian.Uint64(data[1:]))}}, nil
		}
	case program.Equals(sol.SystemProgramID):
		if len(data) == 12 && binary.LittleEndian.Uint32(data) == 2 {
			if err := need(2); err != nil {
				return Instruction{}, err
			}
			return Instruction{Program: "system", Method: "transfer", Args: map[string]string{"from": accounts[0], "to": accounts[1],
				"lamports": fmt.Sprint(binary.LittleEndian.Uint64(data[4:]))}}, nil
		}
	case program.Equals(sol.SPLAssociatedTokenAccountProgramID):
		if bytes.Equal(data, []byte{1}) {
			if err := need(6); err != nil {
				return Instruction{}, err
			}
			if accounts[4] != sol.SystemProgramID.String() || accounts[5] != sol.TokenProgramID.String() {
				return Instruction{}, fmt.Errorf("createIdempotent names the programs %s and %s", accounts[4], accounts[5])
			}
			return Instruction{Program: "associatedToken", Method: "createIdempotent", Args: map[string]string{
				"payer": accounts[0], "account": accounts[1], "owner": accounts[2], "mint": accounts[3]}}, nil
		}
	case program.Equals(sol.TokenProgramID):
		if len(data) == 10 && data[0] == 12 {
			if err := need(4); err != nil {
				return Instruction{}, err
			}
			return Instruction{Program: "token", Method: "transferChecked", Args: map[string]string{"source": accounts[0], "mint": accounts[1],
				"destination": accounts[2], "owner": accounts[3], "amount": fmt.Sprint(binary.LittleEndian.Uint64(data[1:9])), "decimals": fmt.Sprint(data[9])}}, nil
		}
	}
	return Instruction{}, fmt.Errorf("a call of %s (data %x) that this service never builds", program, data)
}

// CheckRequest verifies, before a wallet signs, that a signing request's bytes are what it
// says: the message in its readable fields is its raw bytes, hashes to its digest, is paid
// for and signed by this wallet alone, and holds exactly the instructions, fee payer,
// blockhash and compute budget its readable fields describe.
func CheckRequest(unsignedTx []byte, raw []byte, digest, address string) error {
	var f Fields
	if err := json.Unmarshal(unsignedTx, &f); err != nil || f.Type != FieldsType {
		return fmt.Errorf("solana: the unsigned transaction is not a Solana one")
	}
	message, err := base64.StdEncoding.DecodeString(f.Message)
	if err != nil || !bytes.Equal(message, raw) {
		return fmt.Errorf("solana: the readable transaction's message is not the request's bytes")
	}
	if sum := sha256.Sum256(raw); !strings.EqualFold(hex.EncodeToString(sum[:]), digest) {
		return fmt.Errorf("solana: the digest is not the SHA-256 of the message")
	}
	m, err := DecodeMessage(raw)
	if err != nil {
		return err
	}
	if m.FeePayer != address || m.Signers != 1 {
		return fmt.Errorf("solana: the message is paid by %s with %d signers, not by this wallet (%s) alone", m.FeePayer, m.Signers, address)
	}
	if f.FeePayer != m.FeePayer || f.RecentBlockhash != m.RecentBlockhash || f.ComputeUnitLimit != m.ComputeUnitLimit || f.ComputeUnitPrice != m.ComputeUnitPrice {
		return fmt.Errorf("solana: the readable fee payer, blockhash or compute budget is not the message's")
	}
	if !slices.EqualFunc(f.Instructions, m.Instructions, func(a, b Instruction) bool {
		return a.Program == b.Program && a.Method == b.Method && maps.Equal(a.Args, b.Args)
	}) {
		return fmt.Errorf("solana: the readable instructions are not the message's")
	}
	return nil
}

// CheckIntent verifies that a decoded message does exactly what one leg of an approved
// intent says, and nothing else: for each of its payees in order (its recipient, or a
// batch part's recipients, whose total its amount must be), for SOL one System transfer of
// the amount from the fee payer to the payee; for a token, one TransferChecked of the
// amount of the intent's mint (its contract) from the fee payer's account of it to the
// payee's associated token account, beside at most that account's CreateIdempotent paid
// by the fee payer. The compute budget may be set; any other instruction is refused.
//
// A token transfer's source must be the fee payer's own associated token account of the
// mint.
func CheckIntent(m Message, leg chain.Intent) error {
	payees := leg.Recipients
	if len(payees) == 0 {
		payees = []chain.IntentPayee{{To: leg.To, Amount: leg.Amount}}
	} else if err := checkTotal(leg); err != nil {
		return err
	}
	moves := 0
	for _, in := range m.Instructions {
		a := in.Args
		switch in.Program + "." + in.Method {
		case "computeBudget.setComputeUnitLimit", "computeBudget.setComputeUnitPrice":
			continue
		case "associatedToken.createIdempotent":
			isPayee := slices.ContainsFunc(payees, func(p chain.IntentPayee) bool { return p.To == a["owner"] })
			if !isPayee || a["payer"] != m.FeePayer || a["mint"] != leg.Contract || !IsAssociated(a["account"], a["owner"], leg.Contract) {
				return fmt.Errorf("the message creates the token account %s of %s for %s, whom the intent does not pay", a["account"], a["mint"], a["owner"])
			}
			continue
		}
		if moves >= len(payees) {
			return fmt.Errorf("the message calls %s.%s after the %d moves of its intent", in.Program, in.Method, len(payees))
		}
		p := payees[moves]
		moves++
		switch in.Program + "." + in.Method {
		case "system.transfer":
			if leg.Contract != "" || a["from"] != m.FeePayer || a["to"] != p.To || a["lamports"] != p.Amount {
				return fmt.Errorf("move %d sends %s lamports from %s to %s; the intent: %s base units of %s to %s", moves-1, a["lamports"], a["from"], a["to"], p.Amount, leg.Asset, p.To)
			}
		case "token.transferChecked":
			if leg.Contract == "" || leg.Method != "transferChecked" || a["mint"] != leg.Contract || a["owner"] != m.FeePayer ||
				!IsAssociated(a["source"], m.FeePayer, leg.Contract) || !IsAssociated(a["destination"], p.To, leg.Contract) || a["amount"] != p.Amount {
				return fmt.Errorf("move %d moves %s base units of %s to the token account %s; the intent: %s base units of %s to %s", moves-1, a["amount"], a["mint"], a["destination"], p.Amount, leg.Contract, p.To)
			}
		default:
			return fmt.Errorf("the message calls %s.%s, which the intent does not", in.Program, in.Method)
		}
	}
	if moves != len(payees) {
		return fmt.Errorf("the message moves funds %d times; the intent pays %d times", moves, len(payees))
	}
	return nil
}

// checkTotal holds a batch part's intent to its recipients: its amount, which a signer's
// approval tiers read, is their total.
func checkTotal(leg chain.Intent) error {
	total := new(big.Int)
	for _, p := range leg.Recipients {
		units, ok := new(big.Int).SetString(p.Amount, 10)
		if !ok {
			return fmt.Errorf("the intent's amount %q is not base units", p.Amount)
		}
		total.Add(total, units)
	}
	if total.String() != leg.Amount {
		return fmt.Errorf("the intent's recipients come to %s, its amount is %s", total, leg.Amount)
	}
	return nil
}

// IsAssociated reports whether account is owner's associated token account of mint.
func IsAssociated(account, owner, mint string) bool {
	o, err1 := sol.PublicKeyFromBase58(owner)
	m, err2 := sol.PublicKeyFromBase58(mint)
	if err1 != nil || err2 != nil {
		return false
	}
	ata, _, err := sol.FindAssociatedTokenAddress(o, m)
	return err == nil && ata.String() == account
}

// AssociatedOwner returns which of owners has account as its associated token account of
// mint, for a signer that allows owners but sees token accounts.
func AssociatedOwner(account, mint string, owners []string) (string, bool) {
	for _, o := range owners {
		if IsAssociated(account, o, mint) {
			return o, true
		}
	}
	return "", false
}
