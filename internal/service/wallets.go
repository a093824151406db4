package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"

	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// WalletChallengeTTL is how long a registration challenge may be signed and used.
const WalletChallengeTTL = 5 * time.Minute

// WalletSyncer reads a newly registered wallet's balances from its chain at once,
// besides the schedule that refreshes every wallet.
type WalletSyncer interface {
	SyncWallet(ctx context.Context, w workflows.WalletRef) error
}

// solana is the one chain whose wallets are ed25519 keys; every other chain is an EVM one.
const solana = "solana"

// WalletProof is a registration: the wallet, and the challenge signed with its key.
type WalletProof struct {
	Chain, Address, PublicKey, Label string
	ChallengeID, Signature           string
}

// treasuryDeveloper refuses anyone without developer on the treasury app (the owner
// holds it): registering, labelling and archiving wallets.
func treasuryDeveloper(who Caller) error {
	if !who.Can("treasury", auth.ActionDeveloper) {
		return refuse(PermissionDenied, "Registering and changing wallets needs 'developer' on the 'treasury' app (or the organisation's owner).")
	}
	return nil
}

// walletAddress reads the wallet a challenge or a registration names: a checksummed 0x
// address on an EVM chain, a base58 public key on Solana (given as address or publicKey).
func (s *Service) walletAddress(chainName, address, publicKey string) (string, []orders.FieldError) {
	var errs []orders.FieldError
	switch {
	case chainName == "":
		return "", append(errs, field("chain", "is required"))
	case len(s.Chains) > 0 && !slices.Contains(s.Chains, chainName):
		return "", append(errs, field("chain", "is not served here; one of "+strings.Join(s.Chains, ", ")))
	case chainName == solana:
		if address == "" {
			address = publicKey
		}
		if publicKey != "" && publicKey != address {
			return "", append(errs, field("publicKey", "is the address on Solana; give one of them"))
		}
		if !keys.IsSolanaAddress(address) {
			return "", append(errs, field("address", "must be a Solana address: base58 of the 32-byte public key"))
		}
		return address, nil
	default:
		if publicKey != "" {
			errs = append(errs, field("publicKey", "is read from the signature on EVM chains; give the address"))
		}
		if !common.IsHexAddress(address) || !strings.HasPrefix(address, "0x") {
			return "", append(errs, field("address", "must be a 0x address of 20 bytes"))
		}
		return common.HexToAddress(address).Hex(), errs
	}
}

// WalletChallenge issues the message a wallet's key must sign to register it (SPEC
// 3.1a): it names the organisation, the chain and the address, and expires in five
// minutes.
func (s *Service) WalletChallenge(ctx context.Context, who Caller, chainName, address, publicKey string) (*store.WalletChallenge, error) {
	if err := treasuryDeveloper(who); err != nil {
		return nil, err
	}
	address, errs := s.walletAddress(chainName, address, publicKey)
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	org, err := s.Store.Organization(ctx, who.OrgID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	c := &store.WalletChallenge{ID: ids.New(ids.WalletChallenge), OrgID: who.OrgID, Chain: chainName, Address: address,
		CreatedBy: who.ID, CreatedAt: now, ExpiresAt: now.Add(WalletChallengeTTL)}
	c.Message = fmt.Sprintf("Register this wallet with treasury.\n\nOrganisation: %s (%s)\nChain: %s\nAddress: %s\nChallenge: %s\nExpires: %s\n\nSigning this message moves no funds.",
		org.Name, org.ID, chainName, address, c.ID, events.FormatTime(c.ExpiresAt))
	if err := s.Store.CreateWalletChallenge(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// readLabel is a wallet's label: 1 to 100 characters.
func readLabel(label string) (string, *orders.FieldError) {
	label = strings.TrimSpace(label)
	if label == "" || utf8.RuneCountInString(label) > 100 || !utf8.ValidString(label) {
		f := field("label", "needs 1 to 100 characters")
		return label, &f
	}
	return label, nil
}

// RegisterWallet records a wallet whose key signed the challenge: EIP-191 personal_sign
// recovering to the address on EVM chains, ed25519 over the message on Solana. The
// challenge is used once; the first balance sync starts at once.
func (s *Service) RegisterWallet(ctx context.Context, who Caller, in WalletProof) (*Wallet, error) {
	if err := treasuryDeveloper(who); err != nil {
		return nil, err
	}
	address, errs := s.walletAddress(in.Chain, in.Address, in.PublicKey)
	label, bad := readLabel(in.Label)
	if bad != nil {
		errs = append(errs, *bad)
	}
	if in.ChallengeID == "" {
		errs = append(errs, field("challengeId", "is required: POST /treasury/wallets/challenges gives one"))
	}
	if in.Signature == "" {
		errs = append(errs, field("signature", "is required"))
	}
	if len(errs) > 0 {
		return nil, invalid(errs...)
	}
	c, err := s.Store.WalletChallenge(ctx, who.OrgID, in.ChallengeID)
	now := s.now()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, invalid(field("challengeId", "is not a challenge of your organisation"))
	case err != nil:
		return nil, err
	case c.UsedAt != nil || !now.Before(c.ExpiresAt):
		return nil, invalid(field("challengeId", "is used already or expired: ask for a new one"))
	case c.Chain != in.Chain || c.Address != address:
		return nil, invalid(field("challengeId", "was issued for another wallet ("+c.Chain+" "+c.Address+")"))
	}
	w := &store.Wallet{ID: s.newID(ids.Wallet), OrgID: who.OrgID, Chain: in.Chain, Address: address, Label: label,
		CreatedAt: now, Creator: creatorOf(who)}
	if in.Chain == solana {
		w.Scheme = chain.Ed25519
		w.PublicKey, err = keys.VerifySolanaMessage(address, c.Message, in.Signature)
	} else {
		w.Scheme = chain.Secp256k1
		var signer common.Address
		signer, w.PublicKey, err = keys.RecoverPersonalSign(c.Message, in.Signature)
		if err == nil && signer != common.HexToAddress(address) {
			err = keys.ErrBadSignature
		}
	}
	if err != nil {
		how := "EIP-191 personal_sign, 0x and 65 bytes of hex"
		if in.Chain == solana {
			how = "ed25519 over the message's UTF-8 bytes, base58"
		}
		return nil, refuse(InvalidSignature, "The signature is not the challenge's message signed by this wallet's key ("+how+").")
	}
	err = s.Store.Tx(ctx, func(tx *store.Store) error {
		if err := tx.RegisterWallet(ctx, c.ID, w, now); err != nil {
			return err
		}
		return tx.AppendAudit(ctx, s.audit(who, "treasury", "wallet.registered", "wallet", w.ID,
			map[string]any{"chain": w.Chain, "address": w.Address, "label": w.Label}))
	})
	switch {
	case errors.Is(err, store.ErrWalletTaken):
		return nil, refuse(Conflict, "A wallet with this address on "+w.Chain+" is registered already.")
	case errors.Is(err, store.ErrChallengeUnusable):
		return nil, invalid(field("challengeId", "is used already or expired: ask for a new one"))
	case err != nil:
		return nil, err
	}
	if s.WalletSync != nil {
		if err := s.WalletSync.SyncWallet(ctx, workflows.WalletRef{ID: w.ID, Chain: w.Chain, Address: w.Address}); err != nil {
			s.Log.WarnContext(ctx, "first balance sync not started; the schedule syncs the wallet", "walletId", w.ID, "error", err)
		}
	}
	return &Wallet{Wallet: w}, nil
}

// RelabelWallet changes a wallet's label.
func (s *Service) RelabelWallet(ctx context.Context, who Caller, id, label string) (*Wallet, error) {
	if err := treasuryDeveloper(who); err != nil {
		return nil, err
	}
	label, bad := readLabel(label)
	if bad != nil {
		return nil, invalid(*bad)
	}
	return s.changeWallet(ctx, who, id, func(tx *store.Store) (*store.Wallet, bool, error) {
		w, err := tx.RelabelWallet(ctx, who.OrgID, id, label)
		return w, true, err
	}, "wallet.relabelled", map[string]any{"label": label})
}

// ArchiveWallet stops a wallet taking new orders; its orders, events and balances stay.
// Archiving one archived already changes nothing.
func (s *Service) ArchiveWallet(ctx context.Context, who Caller, id string) (*Wallet, error) {
	if err := treasuryDeveloper(who); err != nil {
		return nil, err
	}
	return s.changeWallet(ctx, who, id, func(tx *store.Store) (*store.Wallet, bool, error) {
		return tx.ArchiveWallet(ctx, who.OrgID, id, s.now())
	}, "wallet.archived", nil)
}

// changeWallet applies change to one of the caller's wallets and, when it changed
// anything, writes its audit record, in one transaction.
func (s *Service) changeWallet(ctx context.Context, who Caller, id string, change func(tx *store.Store) (*store.Wallet, bool, error),
	action string, details any) (*Wallet, error) {
	if !who.CanReach(id) {
		return nil, refuse(NotFound, "No wallet of your organisation has this id.")
	}
	var w *store.Wallet
	err := s.Store.Tx(ctx, func(tx *store.Store) error {
		var changed bool
		var err error
		if w, changed, err = change(tx); err != nil || !changed {
			return err
		}
		return tx.AppendAudit(ctx, s.audit(who, "treasury", action, "wallet", id, details))
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse(NotFound, "No wallet of your organisation has this id.")
	}
	if err != nil {
		return nil, err
	}
	return &Wallet{Wallet: w}, nil
}
