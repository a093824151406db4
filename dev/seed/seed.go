package seed

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/internal/approvers"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain/devchain"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/store"
)

// Prices are the seeded USD prices.
var Prices = map[string]string{"ETH": "3000", "WBTC": "60000", "USDC": "1", "MATIC": "0.5", "SOL": "150"}

// balancePlan gives the seeded holdings of each wallet of walletPlan, by position.
var balancePlan = []map[string]string{
	{"ETH": "1000", "USDC": "10000000", "WBTC": "10"},
	{"ETH": "1000", "USDC": "10000000", "WBTC": "10"},
	{"ETH": "100", "USDC": "1000000"},
	{"MATIC": "100000", "USDC": "1000000"},
	{"SOL": "10000"},
}

// Ensure makes sure the data directory holds credentials and the store holds the demo
// organisation they describe. A data directory that already has both is left as it is
// (only the URLs in the file are refreshed), so re-running keeps data and credentials.
func Ensure(ctx context.Context, s *store.Store, dataDir string, urls URLs, log *slog.Logger) (*Credentials, error) {
	credPath := filepath.Join(dataDir, CredentialsFile)
	signerPath := filepath.Join(dataDir, SignerKeysFile)
	var creds Credentials
	signer := SignerKeys{}
	haveCreds, err := readJSON(credPath, &creds)
	if err != nil {
		return nil, err
	}
	haveSigner, err := readJSON(signerPath, &signer)
	if err != nil {
		return nil, err
	}
	seeded := false
	if haveCreds {
		if seeded, err = s.OrganizationExists(ctx, creds.OrgID); err != nil {
			return nil, err
		}
	}
	switch {
	case haveCreds && haveSigner:
	case seeded:
		return nil, fmt.Errorf("seed: %s is missing while the demo organisation exists; the dev signer cannot sign without it (remove the data directory to start over)", signerPath)
	default:
		c, sk, err := newCredentials(urls)
		if err != nil {
			return nil, err
		}
		creds, signer = *c, sk
		if err := writeJSON(signerPath, signer); err != nil {
			return nil, err
		}
	}
	if creds.Member.Email == "" {
		// Credentials written before the member existed get one now; populate makes the
		// person in a store not seeded yet, and here in one that is.
		var firstErr error
		creds.Member = newMember(&firstErr)
		if firstErr == nil && seeded {
			firstErr = seedPerson(ctx, s, creds.OrgID, creds.Member, auth.RoleMember, memberActions, time.Now().UTC())
		}
		if firstErr != nil {
			return nil, fmt.Errorf("seed: the member: %w", firstErr)
		}
	}
	if creds.ApproverKeys == nil {
		// Credentials written before approver keys existed get them now, on the seeded
		// approving keys of a store seeded already too.
		var firstErr error
		creds.ApproverKeys = newApproverKeys(&firstErr)
		if firstErr == nil && seeded {
			firstErr = s.Tx(ctx, func(tx *store.Store) error { return seedApproverKeys(ctx, tx, &creds, time.Now().UTC()) })
		}
		if firstErr != nil {
			return nil, fmt.Errorf("seed: the approver keys: %w", firstErr)
		}
	}
	creds.BaseURL, creds.WSURL, creds.TemporalUIURL = urls.BaseURL, urls.WSURL, urls.TemporalUIURL
	if err := writeJSON(credPath, creds); err != nil {
		return nil, err
	}
	if !seeded {
		if err := s.Tx(ctx, func(tx *store.Store) error { return populate(ctx, tx, &creds, signer) }); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
		log.Info("seeded the demo organisation", "orgId", creds.OrgID, "otherOrgId", creds.OtherOrg.OrgID)
	}
	return &creds, nil
}

// LoadSignerKeys reads the dev signer's keys from the data directory, by wallet id: the
// autoSign wallets' only.
func LoadSignerKeys(dataDir string) (map[string]*keys.Key, error) {
	var creds Credentials
	if _, err := readJSON(filepath.Join(dataDir, CredentialsFile), &creds); err != nil {
		return nil, err
	}
	all, err := WalletKeys(dataDir)
	if err != nil {
		return nil, err
	}
	out := map[string]*keys.Key{}
	for _, w := range creds.Wallets {
		if w.AutoSign {
			out[w.ID] = all[w.ID]
		}
	}
	return out, nil
}

// WalletKeys returns the private keys of every seeded wallet, the manual one's included:
// the dev chains use them once, to grant the dev contracts their allowances.
func WalletKeys(dataDir string) (map[string]*keys.Key, error) {
	signer := SignerKeys{}
	if _, err := readJSON(filepath.Join(dataDir, SignerKeysFile), &signer); err != nil {
		return nil, err
	}
	var creds Credentials
	if _, err := readJSON(filepath.Join(dataDir, CredentialsFile), &creds); err != nil {
		return nil, err
	}
	out := map[string]*keys.Key{}
	for _, w := range creds.Wallets {
		k, err := walletKey(signer, w)
		if err != nil {
			return nil, err
		}
		out[w.ID] = k
	}
	return out, nil
}

func populate(ctx context.Context, tx *store.Store, c *Credentials, signer SignerKeys) error {
	now := time.Now().UTC()
	for _, org := range []store.Organization{
		{ID: c.OrgID, Name: "Demo Treasury", CreatedAt: now},
		{ID: c.OtherOrg.OrgID, Name: "Other Org", CreatedAt: now},
	} {
		if err := tx.CreateOrganization(ctx, &org); err != nil {
			return err
		}
	}
	if err := seedPerson(ctx, tx, c.OrgID, c.Owner, auth.RoleOwner, auth.AllActions, now); err != nil {
		return err
	}
	if err := seedPerson(ctx, tx, c.OrgID, c.Member, auth.RoleMember, memberActions, now); err != nil {
		return err
	}
	for _, app := range auth.Apps {
		k := c.Keys[app]
		keys := []struct{ secret, label, actions string }{
			{k.SK, app + " secret key", ""},
			{k.PK, app + " publishable key", ""},
			{k.Read, app + " read", auth.ActionRead},
			{k.Approve, app + " approver", auth.ActionApprove},
			{k.Sign, app + " signer", auth.ActionSign},
			{c.SecondApprover[app], app + " second approver", auth.ActionApprove},
		}
		for _, key := range keys {
			if key.secret == "" {
				continue
			}
			if err := createKey(ctx, tx, c.OrgID, app, key.secret, key.label, key.actions, now); err != nil {
				return err
			}
		}
	}
	if err := seedApproverKeys(ctx, tx, c, now); err != nil {
		return err
	}
	if err := createKey(ctx, tx, c.OtherOrg.OrgID, "pay", c.OtherOrg.Keys["pay"]["sk"], "other org pay secret key", "", now); err != nil {
		return err
	}
	for app, oc := range c.OAuthClients {
		err := tx.CreateOAuthClient(ctx, &store.OAuthClient{ID: oc.ClientID, OrgID: c.OrgID, App: app,
			SecretHash: auth.HashSecret(oc.ClientSecret), Scopes: oc.Scopes, Label: "demo " + app + " client", CreatedAt: now})
		if err != nil {
			return err
		}
	}
	for asset, price := range Prices {
		if err := tx.UpsertPrice(ctx, &store.Price{Asset: asset, USDPrice: decimal.RequireFromString(price), UpdatedAt: now}); err != nil {
			return err
		}
	}
	for i, w := range c.Wallets {
		key, err := walletKey(signer, w)
		if err != nil {
			return err
		}
		label := fmt.Sprintf("%s %d", w.Chain, i+1)
		if !w.AutoSign {
			label += " (manual signing)"
		}
		if err := createWallet(ctx, tx, c.OrgID, w.ID, w.Chain, label, w.AutoSign, key, balancePlan[i], now); err != nil {
			return err
		}
	}
	// The other organisation gets one funded wallet, so that isolation is visible.
	otherKey, err := keys.Generate(SchemeOf("ethereum"))
	if err != nil {
		return err
	}
	if err := createWallet(ctx, tx, c.OtherOrg.OrgID, ids.New(ids.Wallet), "ethereum", "other org wallet", false, otherKey, map[string]string{"ETH": "50"}, now); err != nil {
		return err
	}
	for _, org := range []string{c.OrgID, c.OtherOrg.OrgID} {
		for _, app := range auth.Apps {
			if err := seedPolicy(ctx, tx, org, app, now); err != nil {
				return err
			}
		}
	}
	return tx.AppendAudit(ctx, &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: c.OrgID, App: "treasury",
		ActorType: "system", ActorID: "seed", Action: "organization.seeded", ResourceType: "organization",
		ResourceID: c.OrgID, CorrelationID: "seed", Details: "{}", CreatedAt: now})
}

// memberActions are the seeded member's, on every app.
var memberActions = []string{auth.ActionApprove, auth.ActionDeveloper}

// seedPerson makes a person of the organisation who signs in with the given password,
// holding the actions on every app.
func seedPerson(ctx context.Context, tx *store.Store, orgID string, who Person, role string, actions []string, now time.Time) error {
	hash, err := auth.HashPassword(who.Password)
	if err != nil {
		return err
	}
	perms := make([]store.MemberPermission, 0, len(auth.Apps))
	for _, app := range auth.Apps {
		perms = append(perms, store.MemberPermission{App: app, Actions: auth.FormatActions(actions)})
	}
	return tx.CreateUser(ctx, &store.User{ID: ids.New(ids.User), OrgID: orgID, Email: who.Email,
		PasswordHash: string(hash), Role: role, CreatedAt: now}, perms)
}

// seedApproverKeys gives each seeded approving key the approver key credentials name for
// it (SPEC 10), so that signed approvals work out of the box.
func seedApproverKeys(ctx context.Context, tx *store.Store, c *Credentials, now time.Time) error {
	for app, ak := range c.ApproverKeys {
		for _, pair := range []struct {
			secret string
			key    ApproverKey
		}{{c.Keys[app].Approve, ak.Approve}, {c.SecondApprover[app], ak.SecondApprover}} {
			credential, err := tx.APIKeyBySecretHash(ctx, auth.HashSecret(pair.secret))
			if err != nil {
				return fmt.Errorf("the %s approving key: %w", app, err)
			}
			private, err := keys.Parse(pair.key.Scheme, pair.key.PrivateKey)
			if err != nil {
				return fmt.Errorf("the %s approver key %s: %w", app, pair.key.KeyID, err)
			}
			err = tx.AttachApproverKey(ctx, &store.ApproverKey{ID: pair.key.KeyID, OrgID: c.OrgID, Scheme: private.Scheme,
				PublicKey: private.PublicKey(), Kind: approvers.KindKey, CredentialID: &credential.ID, CreatedAt: now})
			if err != nil {
				return fmt.Errorf("the %s approver key %s: %w", app, pair.key.KeyID, err)
			}
		}
	}
	return nil
}

func createKey(ctx context.Context, tx *store.Store, org, app, secret, label, actions string, now time.Time) error {
	kind := auth.KindOf(secret)
	if kind == "" {
		return fmt.Errorf("malformed seeded key for %s", label)
	}
	return tx.CreateAPIKey(ctx, &store.APIKey{ID: ids.New(ids.APIKey), OrgID: org, App: app, Kind: kind,
		Actions: actions, Label: label, SecretHash: auth.HashSecret(secret), SecretHint: auth.Hint(secret), CreatedAt: now})
}

// createWallet records a seeded wallet with its holdings, and credits them on the
// simulated chain; the dev EVM chains fund the same holdings on chain (see Holdings).
func createWallet(ctx context.Context, tx *store.Store, org, id, chainName, label string, autoSign bool,
	key *keys.Key, holdings map[string]string, now time.Time) error {
	address := addressOf(chainName, key)
	err := tx.CreateWallet(ctx, &store.Wallet{ID: id, OrgID: org, Chain: chainName, Address: address,
		PublicKey: key.PublicKey(), Scheme: key.Scheme, AutoSign: autoSign, Label: label, CreatedAt: now})
	if err != nil {
		return err
	}
	amounts := map[string]decimal.Decimal{}
	for asset, amt := range holdings {
		d := decimal.RequireFromString(amt)
		amounts[asset] = d
		if err := tx.DevchainCredit(ctx, chainName, address, asset, d); err != nil {
			return err
		}
	}
	return tx.ReplaceBalances(ctx, id, amounts, now)
}

func seedPolicy(ctx context.Context, tx *store.Store, org, app string, now time.Time) error {
	maxOrder := decimal.RequireFromString("5000000")
	rules := policy.Rules{
		MaxOrderUSD: &maxOrder,
		ApprovalTiers: []policy.Tier{
			{MinUSD: decimal.RequireFromString("10000"), Quorum: 1},
			{MinUSD: decimal.RequireFromString("1000000"), Quorum: 2},
		},
	}
	switch app {
	case "pay":
		rules.DestinationWhitelist = []string{
			"0x" + strings.Repeat("1", 40), "0x" + strings.Repeat("2", 40), devchain.RevertAddress,
		}
	case "trade":
		rules.DeniedPairs = [][2]string{{"WBTC", "USDC"}}
	case "earn", "borrow":
		rules.AllowedProtocols = []string{"aave", "compound"}
	}
	if app == "earn" {
		// One app asks for a change approval, so that maker-checker on policies can be seen
		// without setting it up: a draft is published once the member approves it.
		rules.ChangeApprovals = 1
	}
	doc, err := rules.Document()
	if err != nil {
		return err
	}
	return tx.PublishPolicy(ctx, &store.Policy{OrgID: org, App: app, Document: doc, UpdatedBy: "seed", UpdatedAt: now}, &store.PolicyVersion{})
}
