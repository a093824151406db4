package seed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/opentreasury/treasury/dev/devsvm"
	"github.com/opentreasury/treasury/internal/auth"
	"github.com/opentreasury/treasury/internal/chain/keys"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/policy"
	"github.com/opentreasury/treasury/internal/prices"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
	"github.com/opentreasury/treasury/workflows"
)

// EVMFailAddress is the destination whose transfers revert on the dev EVM chains (SPEC
// 3.6): their token refuses it, and a contract that reverts sits there for native ones.
const EVMFailAddress = "0x000000000000000000000000000000000000dEaD"

// Prices are the seeded USD prices.
var Prices = map[string]string{"ETH": "3000", "WBTC": "60000", "USDC": "1", "MATIC": "0.5", "SOL": "150"}

// SolanaPayees are the Solana destinations of the seeded whitelist (SPEC 10), the public
// keys of the seeds SHA-256("treasury dev payee 1") and "… 2"; "… 3"
// (tdVSQHzC367uvzKbUbe84mWc9NmHb7nhF61BzRYMPVK) is deliberately left out.
var SolanaPayees = [2]string{"C68HJbL4YDuM47YaQrB7vQGKLVtTKkxifD2XgUtaXTss", "CxDJemSRqPZXCTCeAXjroaaXKbuYT6BX33TsNdTXenj8"}

// balancePlan gives the seeded holdings of each wallet of walletPlan, by position.
var balancePlan = []map[string]string{
	{"ETH": "1000", "USDC": "10000000", "WBTC": "10"},
	{"ETH": "1000", "USDC": "10000000", "WBTC": "10"},
	{"ETH": "100", "USDC": "1000000"},
	{"MATIC": "100000", "USDC": "1000000"},
	{"SOL": "10000", "USDC": "1000000"},
	{"SOL": "10000", "USDC": "1000000"},
}

// Ensure makes sure the data directory holds credentials and the store holds the demo
// organisation they describe. A data directory that already has both is left as it is
// (only the URLs in the file are refreshed), so re-running keeps data and credentials; a
// store without the organisation gets it again, with the ids and secrets of the file.
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
	exists, seeded := false, false
	if haveCreds {
		if exists, err = s.OrganizationExists(ctx, creds.OrgID); err == nil && exists {
			seeded, err = s.AuditRecorded(ctx, creds.OrgID, seededAction)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case exists && !haveSigner:
		return nil, fmt.Errorf("seed: %s is missing while the demo organisation exists; the dev signer cannot sign without it (remove the data directory to start over)", signerPath)
	case exists && !seeded:
		return nil, fmt.Errorf("seed: the demo organisation %s was only partly made (an earlier start stopped while seeding); remove the data directory and its database to start over", creds.OrgID)
	case haveCreds && haveSigner && !exists:
		if err := reseedable(&creds, signer); err != nil {
			return nil, fmt.Errorf("seed: %s cannot seed a new database: %w; start from a new data directory", credPath, err)
		}
	case haveCreds && haveSigner:
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
	creds.BaseURL, creds.WSURL, creds.TemporalUIURL = urls.BaseURL, urls.WSURL, urls.TemporalUIURL
	if err := writeJSON(credPath, creds); err != nil {
		return nil, err
	}
	if !seeded {
		if err := populate(ctx, s, &creds, signer, log); err != nil {
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

// reseedable checks that a credentials file names everything the seed makes, as this
// version makes it, before a new database is seeded from it.
func reseedable(c *Credentials, signer SignerKeys) error {
	if c.Member.Email == "" || c.ApproverKeys == nil {
		return errors.New("it was written before the member and the approver keys existed")
	}
	if c.SolanaFailAddress == "" {
		return errors.New("it was written before the dev Solana chain ran Solana's own runtime")
	}
	for _, w := range c.Wallets {
		key, err := walletKey(signer, w)
		if err != nil {
			return err
		}
		if addressOf(key) != w.Address {
			return fmt.Errorf("wallet %s's address %s is not its key's (%s)", w.ID, w.Address, addressOf(key))
		}
	}
	return nil
}

// seedActor is the actor the seed's own records name.
const seedActor = "seed"

// seededAction is the audit record of a finished seed: an organisation without it was
// left half made.
const seededAction = "organization.seeded"

// populate makes the demo organisation and the other one through the service's own
// operations, as the operator's command, the one-time links, the Team page and the
// routes do; only the ids and secrets are the credentials file's. What has no production
// door is written as the dev bundle's own: which wallets the in-process dev signer serves
// (autoSign), the first balances (plannedSync: what the dev chains then fund each wallet
// with, as a faucet) and the mark of a finished seed.
func populate(ctx context.Context, s *store.Store, c *Credentials, signer SignerKeys, log *slog.Logger) error {
	next := &presets{ids: map[string]string{}, secrets: map[string]string{}}
	sync := &plannedSync{store: s, planned: map[string]map[string]map[string]decimal.Decimal{}}
	svc := &service.Service{Store: s, Log: log, NewID: next.id, NewSecret: next.secret, WalletSync: sync}
	sessions := service.NewSessions(s, auth.NewAuthenticator(s), time.Minute, nil, log)
	if err := seedPrices(ctx, s, log); err != nil {
		return err
	}
	next.ids[ids.Organization] = c.OrgID
	made, err := svc.CreateOrganization(ctx, "Demo Treasury", c.Owner.Email)
	if err != nil {
		return fmt.Errorf("the demo organisation: %w", err)
	}
	owner, err := signIn(ctx, sessions, made.Link, c.Owner.Password)
	if err != nil {
		return fmt.Errorf("the owner: %w", err)
	}
	if err := addMember(ctx, svc, sessions, owner, c.Member); err != nil {
		return fmt.Errorf("the member: %w", err)
	}
	for _, app := range auth.Apps {
		if err := createKeys(ctx, svc, next, c, app); err != nil {
			return fmt.Errorf("the %s keys: %w", app, err)
		}
	}
	for app, oc := range c.OAuthClients {
		next.ids[ids.OAuthClient], next.secrets[auth.KindClientSecret] = oc.ClientID, oc.ClientSecret
		if _, _, err := svc.CreateOAuthClient(ctx, seedCaller(c.OrgID, app), service.OAuthClientRequest{Scopes: oc.Scopes, Label: "demo " + app + " client"}); err != nil {
			return fmt.Errorf("the %s OAuth client: %w", app, err)
		}
	}
	var autoSign []string
	for i, w := range c.Wallets {
		key, err := walletKey(signer, w)
		if err != nil {
			return err
		}
		label := fmt.Sprintf("%s %d", w.Chain, i+1)
		if !w.AutoSign {
			label += " (manual signing)"
		} else {
			autoSign = append(autoSign, w.ID)
		}
		next.ids[ids.Wallet] = w.ID
		if err := registerWallet(ctx, svc, sync, owner, w.Chain, label, key, balancePlan[i]); err != nil {
			return fmt.Errorf("wallet %s: %w", w.ID, err)
		}
	}
	if err := s.SetAutoSign(ctx, c.OrgID, autoSign); err != nil {
		return err
	}
	for _, app := range auth.Apps {
		if err := seedPolicy(ctx, svc, inApp(owner, app), app); err != nil {
			return err
		}
	}
	if err := sessions.SignOut(ctx, owner.Principal); err != nil {
		return err
	}
	if err := populateOther(ctx, svc, next, sync, c.OtherOrg); err != nil {
		return fmt.Errorf("the other organisation: %w", err)
	}
	if sync.err != nil {
		return fmt.Errorf("the first balance sync: %w", sync.err)
	}
	return s.AppendAudit(ctx, &store.AuditLog{ID: ids.New(ids.AuditLog), OrgID: c.OrgID, App: "treasury",
		ActorType: auth.KindSystem, ActorID: seedActor, Action: seededAction, ResourceType: "organization",
		ResourceID: c.OrgID, CorrelationID: seedActor, Details: "{}", CreatedAt: time.Now().UTC()})
}

// populateOther makes the second organisation, which exists to prove isolation: one pay
// secret key, one funded wallet, the same policies. Nobody signs in to it.
func populateOther(ctx context.Context, svc *service.Service, next *presets, sync *plannedSync, o OtherOrg) error {
	next.ids[ids.Organization] = o.OrgID
	if _, err := svc.CreateOrganization(ctx, "Other Org", "owner@other.example.com"); err != nil {
		return err
	}
	next.secrets[auth.KindSecret] = o.Keys["pay"]["sk"]
	if _, _, err := svc.CreateAPIKey(ctx, seedCaller(o.OrgID, "pay"), service.KeyRequest{Kind: auth.KindSecret, Label: "other org pay secret key"}); err != nil {
		return err
	}
	key, err := keys.Generate(SchemeOf("ethereum"))
	if err != nil {
		return err
	}
	if err := registerWallet(ctx, svc, sync, seedCaller(o.OrgID, "treasury"), "ethereum", "other org wallet", key, map[string]string{"ETH": "50"}); err != nil {
		return err
	}
	for _, app := range auth.Apps {
		if err := seedPolicy(ctx, svc, seedCaller(o.OrgID, app), app); err != nil {
			return err
		}
	}
	return nil
}

// plannedSync is the first balance sync of a registered wallet: what the seed plans it to
// hold, which the dev chains fund it with when they start (store.ChainHoldings): the seed
// runs before the chains and the worker that syncs wallets from them.
// The service only logs a failed sync (the schedule would sync the wallet later); the
// seed keeps the error, so that no organisation is marked seeded without its balances.
type plannedSync struct {
	store *store.Store
	// planned are the holdings by chain, then address.
	planned map[string]map[string]map[string]decimal.Decimal
	err     error
}

// plan records what a wallet is to hold, before its registration syncs it.
func (p *plannedSync) plan(chainName, address string, holdings map[string]string) {
	if p.planned[chainName] == nil {
		p.planned[chainName] = map[string]map[string]decimal.Decimal{}
	}
	held := map[string]decimal.Decimal{}
	for asset, amount := range holdings {
		held[asset] = decimal.RequireFromString(amount)
	}
	p.planned[chainName][address] = held
}

func (p *plannedSync) SyncWallet(ctx context.Context, w workflows.WalletRef) error {
	err := p.store.ReplaceBalances(ctx, w.ID, p.planned[w.Chain][w.Address], time.Now().UTC())
	p.err = errors.Join(p.err, err)
	return err
}

// presets are the ids and secrets the service's next operation takes instead of new ones:
// each is used once.
type presets struct {
	ids, secrets map[string]string
}

func (p *presets) id(prefix string) string {
	if v, ok := take(p.ids, prefix); ok {
		return v
	}
	return ids.New(prefix)
}

func (p *presets) secret(kind string) (string, error) {
	if v, ok := take(p.secrets, kind); ok {
		return v, nil
	}
	return auth.NewSecret(kind)
}

// take removes a preset from m and returns it.
func take(m map[string]string, key string) (string, bool) {
	v, ok := m[key]
	delete(m, key)
	return v, ok
}

// seedCaller is the seed acting for an organisation in one app with every action, as a
// secret key would. No person or credential stands behind it, so each key it makes is an
// actor of its own for maker-checker (the approve and second approver keys are two
// approvers) and names no creator.
func seedCaller(orgID, app string) service.Caller {
	return service.Caller{Principal: &auth.Principal{OrgID: orgID, App: app, Kind: auth.KindSystem, ID: seedActor,
		Actions: auth.AllActions}, CorrelationID: seedActor}
}

// inApp is a signed-in person acting in one app, as a route narrows them.
func inApp(who service.Caller, app string) service.Caller {
	return service.Caller{Principal: who.Principal.InApp(app), CorrelationID: who.CorrelationID}
}

// signIn opens a person's one-time link and sets their password, as the welcome page does;
// the person signed in is the seed's caller.
func signIn(ctx context.Context, sessions *service.Sessions, link service.SignInLink, password string) (service.Caller, error) {
	sess, err := sessions.RedeemLink(ctx, link.Token, password, "127.0.0.1", seedActor)
	if err != nil {
		return service.Caller{}, err
	}
	return service.Caller{Principal: sess.Principal, CorrelationID: seedActor}, nil
}

// memberActions are the seeded member's, on every app.
var memberActions = []string{auth.ActionApprove, auth.ActionDeveloper}

// addMember has the owner add the member on every app, as the Team page does; the member
// then sets their password from their link.
func addMember(ctx context.Context, svc *service.Service, sessions *service.Sessions, owner service.Caller, who Person) error {
	m, link, err := svc.AddMember(ctx, inApp(owner, auth.Apps[0]), who.Email, memberActions)
	if err != nil {
		return err
	}
	for _, app := range auth.Apps[1:] {
		if _, err := svc.SetMemberActions(ctx, inApp(owner, app), m.ID, memberActions); err != nil {
			return err
		}
	}
	member, err := signIn(ctx, sessions, link, who.Password)
	if err != nil {
		return err
	}
	return sessions.SignOut(ctx, member.Principal)
}

// createKeys makes an app's keys of the credentials file, the approving ones with their
// approver keys.
func createKeys(ctx context.Context, svc *service.Service, next *presets, c *Credentials, app string) error {
	k := c.Keys[app]
	list := []struct {
		secret, label, action string
		approver              ApproverKey
	}{
		{k.SK, app + " secret key", "", ApproverKey{}},
		{k.PK, app + " publishable key", "", ApproverKey{}},
		{k.Read, app + " read", auth.ActionRead, ApproverKey{}},
		{k.Approve, app + " approver", auth.ActionApprove, c.ApproverKeys[app].Approve},
		{k.Sign, app + " signer", auth.ActionSign, ApproverKey{}},
		{c.SecondApprover[app], app + " second approver", auth.ActionApprove, c.ApproverKeys[app].SecondApprover},
	}
	for _, key := range list {
		if key.secret == "" {
			continue
		}
		req := service.KeyRequest{Kind: auth.KindOf(key.secret), Label: key.label}
		if key.action != "" {
			req.Actions = []string{key.action}
		}
		if key.approver.KeyID != "" {
			private, err := keys.Parse(key.approver.Scheme, key.approver.PrivateKey)
			if err != nil {
				return fmt.Errorf("the approver key %s: %w", key.approver.KeyID, err)
			}
			req.ApproverKey = &service.ApproverKeyRequest{Scheme: private.Scheme, PublicKey: private.PublicKey()}
			next.ids[ids.ApproverKey] = key.approver.KeyID
		}
		next.secrets[req.Kind] = key.secret
		if _, _, err := svc.CreateAPIKey(ctx, seedCaller(c.OrgID, app), req); err != nil {
			return fmt.Errorf("%s: %w", key.label, err)
		}
	}
	return nil
}

// registerWallet plans a wallet's holdings, then registers it as an organisation does: a
// challenge, signed with the wallet's key, whose registration syncs the balances.
func registerWallet(ctx context.Context, svc *service.Service, sync *plannedSync, who service.Caller, chainName, label string,
	key *keys.Key, holdings map[string]string) error {
	address := addressOf(key)
	sync.plan(chainName, address, holdings)
	challenge, err := svc.WalletChallenge(ctx, who, chainName, address, "")
	if err != nil {
		return err
	}
	var signature string
	if chainName == "solana" {
		signature, err = key.SignSolanaMessage(challenge.Message)
	} else {
		signature, err = key.SignPersonal(challenge.Message)
	}
	if err != nil {
		return err
	}
	_, err = svc.RegisterWallet(ctx, who, service.WalletProof{Chain: chainName, Address: address, Label: label,
		ChallengeID: challenge.ID, Signature: signature})
	return err
}

// seedPrices records the seeded prices as fixed ones, through the price refresh that
// reads production's: the dev bundle's feeds take over at its first run.
func seedPrices(ctx context.Context, s *store.Store, log *slog.Logger) error {
	sources := make([]prices.Source, 0, len(Prices))
	for _, asset := range slices.Sorted(maps.Keys(Prices)) {
		price := decimal.RequireFromString(Prices[asset])
		sources = append(sources, prices.Source{Asset: asset, Fixed: &price})
	}
	_, err := (&prices.Refresher{Store: s, Sources: sources, Log: log}).Refresh(ctx)
	return err
}

func seedPolicy(ctx context.Context, svc *service.Service, who service.Caller, app string) error {
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
			"0x" + strings.Repeat("1", 40), "0x" + strings.Repeat("2", 40), EVMFailAddress,
			SolanaPayees[0], SolanaPayees[1], devsvm.FrozenOwner,
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
	_, err = svc.PutPolicy(ctx, who, app, []byte(doc))
	if err != nil {
		return fmt.Errorf("the %s policy: %w", app, err)
	}
	return nil
}
