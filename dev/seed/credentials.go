// Package seed creates the dev bundle's demo organisation and the credentials file that
// lets a newcomer, an example or a test harness drive every path (SPEC section 10).
// It is for development only: the file holds secrets in the clear.
package seed

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/ids"
)

// CredentialsFile and SignerKeysFile are the names of the files in the data directory.
const (
	CredentialsFile = "credentials.json"
	SignerKeysFile  = "dev-signer-keys.json"
)

// Person is a person's console sign-in: the organisation owner's, or the member's.
type Person struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// AppKeys are the keys of one app. Treasury has no approve or sign key.
type AppKeys struct {
	SK      string `json:"sk"`
	PK      string `json:"pk"`
	Approve string `json:"approve,omitempty"`
	Sign    string `json:"sign,omitempty"`
	Read    string `json:"read"`
}

// OAuthClient is a client-credentials client and its secret.
type OAuthClient struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	Scopes       string `json:"scopes"`
}

// Wallet is one seeded wallet; only the wallet not served by the dev signer carries its
// key, in its scheme's form (secp256k1: hex of 32 bytes; ed25519: a base64 seed).
type Wallet struct {
	ID         string `json:"id"`
	Chain      string `json:"chain"`
	Address    string `json:"address"`
	Scheme     string `json:"scheme"`
	AutoSign   bool   `json:"autoSign"`
	PrivateKey string `json:"privateKey,omitempty"`
}

// ApproverKey is the approver key of a seeded approving key, with its private half, so a
// bot or a test can sign approval statements (SPEC 3.5a) with it.
type ApproverKey struct {
	KeyID      string `json:"keyId"`
	Scheme     string `json:"scheme"`
	PrivateKey string `json:"privateKey"`
}

// AppApproverKeys are the approver keys of an app's two seeded approving keys.
type AppApproverKeys struct {
	Approve        ApproverKey `json:"approve"`
	SecondApprover ApproverKey `json:"secondApprover"`
}

// OtherOrg is a second organisation, to prove isolation.
type OtherOrg struct {
	OrgID string                       `json:"orgId"`
	Keys  map[string]map[string]string `json:"keys"`
}

// Credentials is the content of credentials.json.
type Credentials struct {
	BaseURL       string `json:"baseUrl"`
	WSURL         string `json:"wsUrl"`
	TemporalUIURL string `json:"temporalUiUrl"`
	OrgID         string `json:"orgId"`
	Owner         Person `json:"owner"`
	// Member is a second person, with Approve and Developer on every app, so that
	// maker-checker (orders and policy changes) can be tried at once.
	Member         Person                 `json:"member"`
	Keys           map[string]AppKeys     `json:"keys"`
	SecondApprover map[string]string      `json:"secondApprover"`
	OAuthClients   map[string]OAuthClient `json:"oauthClients"`
	// ApproverKeys are, per app, the approver keys the seeded approve and second
	// approver keys carry.
	ApproverKeys map[string]AppApproverKeys `json:"approverKeys"`
	// SolanaFailAddress is the owner of the dev Solana chain's frozen USDC account: a USDC
	// payment to it fails on chain, the documented failure (SPEC 3.6).
	SolanaFailAddress string   `json:"solanaFailAddress"`
	Wallets           []Wallet `json:"wallets"`
	OtherOrg          OtherOrg `json:"otherOrg"`
}

// SignerKeys maps the id of each autoSign wallet to its private key in its scheme's form;
// the dev signer reads it. The service itself never reads private keys.
type SignerKeys map[string]string

// URLs are where the running bundle answers.
type URLs struct {
	BaseURL, WSURL, TemporalUIURL string
}

// walletPlan is the seeded wallets: chain and whether the dev signer serves it.
var walletPlan = []struct {
	chain    string
	autoSign bool
}{
	{"ethereum", true}, {"ethereum", true}, {"ethereum", false}, {"polygon", true}, {"solana", true}, {"solana", false},
}

func newCredentials(urls URLs) (*Credentials, SignerKeys, error) {
	var firstErr error
	secret := func(kind string) string {
		s, err := auth.NewSecret(kind)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return s
	}
	c := &Credentials{
		BaseURL: urls.BaseURL, WSURL: urls.WSURL, TemporalUIURL: urls.TemporalUIURL,
		OrgID:          ids.New(ids.Organization),
		Owner:          Person{Email: "owner@example.com", Password: randomPassword(&firstErr)},
		Member:         newMember(&firstErr),
		Keys:           map[string]AppKeys{},
		SecondApprover: map[string]string{},
		ApproverKeys:   newApproverKeys(&firstErr),
		OAuthClients: map[string]OAuthClient{
			"trade": {ClientID: ids.New(ids.OAuthClient), ClientSecret: secret(auth.KindClientSecret), Scopes: "trade:read trade:write"},
		},
		OtherOrg:          OtherOrg{OrgID: ids.New(ids.Organization), Keys: map[string]map[string]string{"pay": {"sk": secret(auth.KindSecret)}}},
		SolanaFailAddress: devsvm.FrozenOwner,
	}
	for _, app := range auth.Apps {
		k := AppKeys{SK: secret(auth.KindSecret), PK: secret(auth.KindPublishable), Read: secret(auth.KindResource)}
		if app != "treasury" {
			k.Approve = secret(auth.KindResource)
			k.Sign = secret(auth.KindResource)
			c.SecondApprover[app] = secret(auth.KindResource)
		}
		c.Keys[app] = k
	}
	signer := SignerKeys{}
	for _, w := range walletPlan {
		scheme := SchemeOf(w.chain)
		key, err := keys.Generate(scheme)
		if err != nil {
			return nil, nil, err
		}
		wallet := Wallet{ID: ids.New(ids.Wallet), Chain: w.chain, Address: addressOf(key), Scheme: scheme, AutoSign: w.autoSign}
		if w.autoSign {
			signer[wallet.ID] = key.Encode()
		} else {
			wallet.PrivateKey = key.Encode()
		}
		c.Wallets = append(c.Wallets, wallet)
	}
	return c, signer, firstErr
}

// newApproverKeys makes the approver keys of every app with approving keys.
func newApproverKeys(errp *error) map[string]AppApproverKeys {
	out := map[string]AppApproverKeys{}
	for _, app := range auth.Apps {
		if app != "treasury" {
			out[app] = AppApproverKeys{Approve: newApproverKey(errp), SecondApprover: newApproverKey(errp)}
		}
	}
	return out
}

// newApproverKey makes an ed25519 approver key with its id.
func newApproverKey(errp *error) ApproverKey {
	k, err := keys.Generate(chain.Ed25519)
	if err != nil && *errp == nil {
		*errp = err
	}
	if k == nil {
		return ApproverKey{}
	}
	return ApproverKey{KeyID: ids.New(ids.ApproverKey), Scheme: k.Scheme, PrivateKey: k.Encode()}
}

func randomPassword(errp *error) string {
	pw, err := auth.NewPassword()
	if err != nil && *errp == nil {
		*errp = err
	}
	return pw
}

// SchemeOf is the scheme of the seeded wallets of a chain (SPEC 10): secp256k1 on the
// EVM chains, ed25519 on solana.
func SchemeOf(chainName string) string {
	if chainName == "solana" {
		return chain.Ed25519
	}
	return chain.Secp256k1
}

// walletKey returns the private key of a seeded wallet, from wherever it is kept.
func walletKey(signer SignerKeys, w Wallet) (*keys.Key, error) {
	encoded := w.PrivateKey
	if w.AutoSign {
		encoded = signer[w.ID]
	}
	k, err := keys.Parse(cmp.Or(w.Scheme, chain.Ed25519), encoded)
	if err != nil {
		return nil, fmt.Errorf("seed: no valid key for wallet %s: %w", w.ID, err)
	}
	return k, nil
}

// addressOf is a wallet's address: an EVM key's own, or a Solana key's base58 public key.
func addressOf(k *keys.Key) string { return cmp.Or(k.Address(), k.SolanaAddress()) }

// readJSON reads a JSON file; a missing file is (false, nil).
func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("seed: %s is not valid JSON: %w", path, err)
	}
	return true, nil
}

// writeJSON writes a file readable by its owner only, atomically (temp file + rename),
// so a crash never leaves half a credentials file.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// newMember is the seeded member's sign-in, with a password of its own.
func newMember(firstErr *error) Person {
	return Person{Email: "member@example.com", Password: randomPassword(firstErr)}
}
