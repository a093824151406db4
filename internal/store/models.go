package store

import (
	"time"

	"github.com/shopspring/decimal"
)

// Organization is a customer of the platform; every other row belongs to one.
type Organization struct {
	ID        string
	Name      string
	CreatedAt time.Time
	// DisabledAt: the operator disabled it; every credential of it is refused.
	DisabledAt *time.Time
}

func (Organization) TableName() string { return "organizations" }

// User is a person who signs in to the console: the organisation's owner or a member.
type User struct {
	ID           string
	OrgID        string
	Email        string
	PasswordHash string
	Role         string
	CreatedAt    time.Time
	// PasswordChangedAt ends the sessions signed in before it.
	PasswordChangedAt *time.Time
}

func (User) TableName() string { return "users" }

// MemberPermission grants a user a set of actions (comma separated) in one app.
type MemberPermission struct {
	UserID  string `gorm:"primaryKey"`
	App     string `gorm:"primaryKey"`
	Actions string
}

func (MemberPermission) TableName() string { return "member_permissions" }

// APIKey is the stored half of an issued key: the secret itself is only ever kept as a hash.
type APIKey struct {
	ID          string
	OrgID       string
	App         string
	Kind        string
	Actions     string
	ResourceIDs string `gorm:"column:resource_ids"`
	Label       string
	SecretHash  string
	SecretHint  string
	CreatedAt   time.Time
	LastUsedAt  *time.Time
	RevokedAt   *time.Time
	// ApproverKeyID is the approver key the key was created with, if any (an approving tk_).
	ApproverKeyID *string
	Creator       `gorm:"embedded"`
}

func (APIKey) TableName() string { return "api_keys" }

// OAuthClient is a client-credentials client of one app; its secret is kept as a hash.
type OAuthClient struct {
	ID         string
	OrgID      string
	App        string
	SecretHash string
	Scopes     string
	Label      string
	CreatedAt  time.Time
	RevokedAt  *time.Time
	Creator    `gorm:"embedded"`
	// ApproverKeyID is the approver key the client was created with, if any.
	ApproverKeyID *string
}

// Creator is who made a record, in the one meaning createdBy has everywhere (SPEC 3.2):
// CreatedBy the credential that made it (key_…, oac_…, or usr_… for a signed-in person),
// CreatedByUser the person behind that credential. Either is "" when unknown: the seed
// made the record, or it predates this record of it.
type Creator struct {
	CreatedBy     string
	CreatedByUser string
}

func (OAuthClient) TableName() string { return "oauth_clients" }

// Wallet is an on-chain account of an organisation. Only its public key is stored.
type Wallet struct {
	ID        string
	OrgID     string
	Chain     string
	Address   string
	PublicKey string
	// Scheme is what the wallet signs with: secp256k1 on EVM chains, ed25519 on Solana
	// (chain.Secp256k1, chain.Ed25519).
	Scheme    string `gorm:"default:ed25519"`
	AutoSign  bool
	Label     string
	CreatedAt time.Time
	SyncedAt  *time.Time
	// ArchivedAt: the wallet takes no new orders; its history stays.
	ArchivedAt *time.Time
	Creator    `gorm:"embedded"`
}

func (Wallet) TableName() string { return "wallets" }

// Balance is the last synced amount of one asset in one wallet.
type Balance struct {
	WalletID string          `gorm:"primaryKey"`
	Asset    string          `gorm:"primaryKey"`
	Amount   decimal.Decimal `gorm:"type:numeric"`
	SyncedAt time.Time
}

func (Balance) TableName() string { return "balances" }

// Price is the USD price of one unit of an asset, as last read from its source.
type Price struct {
	Asset    string          `gorm:"primaryKey"`
	USDPrice decimal.Decimal `gorm:"column:usd_price;type:numeric"`
	// UpdatedAt is when the source last set the price: the feed's round's updatedAt.
	UpdatedAt time.Time
	// Source names where it came from (prices.Source.Name); Round is the feed's round.
	Source string
	Round  string
	// ReadAt is when the worker read it; StaleAfter when it stops valuing orders (nil:
	// never, a fixed price).
	ReadAt     *time.Time
	StaleAfter *time.Time
}

// Stale: at now the price may no longer value an order.
func (p Price) Stale(now time.Time) bool { return p.StaleAfter != nil && !now.Before(*p.StaleAfter) }

func (Price) TableName() string { return "prices" }

// Policy is the JSON rule document of one app of an organisation.
type Policy struct {
	OrgID     string `gorm:"primaryKey"`
	App       string `gorm:"primaryKey"`
	Document  string
	Version   int
	UpdatedBy string
	UpdatedAt time.Time
}

func (Policy) TableName() string { return "policies" }

// IdempotencyRecord remembers the first response to a write made with an Idempotency-Key.
type IdempotencyRecord struct {
	OrgID           string `gorm:"primaryKey"`
	Key             string `gorm:"primaryKey"`
	Method          string
	Path            string
	Fingerprint     string
	State           string
	StatusCode      int
	ResponseHeaders string
	ResponseBody    []byte
	CreatedAt       time.Time
	ExpiresAt       time.Time
}

func (IdempotencyRecord) TableName() string { return "idempotency_records" }

// AuditLog is one append-only record of who did what, and under which correlation id.
type AuditLog struct {
	ID            string
	OrgID         string
	App           string
	ActorType     string
	ActorID       string
	Action        string
	ResourceType  string
	ResourceID    string
	CorrelationID string
	Details       string
	CreatedAt     time.Time
	// Seq, PrevHash and Hash place the record in its organisation's audit chain (see
	// AppendAudit); NULL in the database (zero here) until the record is placed.
	Seq      int64
	PrevHash string
	Hash     string
}

func (AuditLog) TableName() string { return "audit_logs" }
