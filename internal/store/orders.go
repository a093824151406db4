package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"
	"gorm.io/gorm"

	"github.com/opentreasury/treasury/internal/events"
	"github.com/opentreasury/treasury/internal/ids"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/migrations"
)

// Order is a payment, trade, earn or borrow order.
type Order struct {
	ID               string
	OrgID            string
	App              string
	Domain           string
	Status           orders.Status
	WalletID         string
	Chain            string
	Details          orders.Fields
	PayloadHash      string
	AmountUSD        decimal.Decimal `gorm:"column:amount_usd;type:numeric"`
	ApprovalRequired bool
	ApprovalQuorum   int
	ApprovalItemID   *string
	PolicyDecision   *string
	// PolicyVersion is the version of the app's policy in force when the order was
	// submitted: the one that evaluates it (nil for orders submitted before versions were
	// recorded). PolicyAllowed says the policy let it through; PolicyAsset and
	// PolicyDestination are the keys its volume counts under.
	PolicyVersion     *int
	PolicyAllowed     bool
	PolicyAsset       string
	PolicyDestination string
	FailureCode       *string
	FailureMessage    *string
	RejectionReason   *string
	RejectionDetail   *string
	// CreatedBy is the credential that created the order (key_…, oac_…, or usr_… for a
	// signed-in person); CreatedByUser the person behind it, or "" when no person is.
	CreatedBy     string
	CreatedByUser string
	CorrelationID string
	WorkflowID    string
	// SubmissionID is the submission (from its Idempotency-Key) that moved the order out
	// of draft, "" for one without a key or before this was kept.
	SubmissionID string
	// ScheduleID is the payout schedule whose run made the order; "" for one a request made.
	ScheduleID    string
	EventSequence int
	CreatedAt     time.Time
	UpdatedAt     time.Time
	SubmittedAt   *time.Time
	CompletedAt   *time.Time
}

func (Order) TableName() string { return "orders" }

// Maker is who maker-checker keeps from deciding the order: the person behind its
// credential, else the credential itself (a key no person created).
func (o *Order) Maker() string {
	if o.CreatedByUser != "" {
		return o.CreatedByUser
	}
	return o.CreatedBy
}

// OrderLeg is one on-chain step of an order, signed and confirmed before the next.
type OrderLeg struct {
	OrderID          string `gorm:"primaryKey"`
	Position         int    `gorm:"primaryKey"`
	Leg              string
	Status           orders.Status
	SigningRequestID *string
	// TxHash is the leg's transaction: the one that confirmed, or the latest broadcast.
	TxHash *string
	// TxHashes are every transaction broadcast for the leg, oldest first, as a JSON
	// array; more than one when a stuck transaction was replaced.
	TxHashes string
}

func (OrderLeg) TableName() string { return "order_legs" }

// Hashes returns TxHashes as a list.
func (l *OrderLeg) Hashes() []string {
	var out []string
	if l.TxHashes != "" {
		_ = json.Unmarshal([]byte(l.TxHashes), &out)
	}
	if len(out) == 0 && l.TxHash != nil {
		out = []string{*l.TxHash}
	}
	return out
}

// AddHash records another transaction broadcast for the leg; it becomes TxHash.
func (l *OrderLeg) AddHash(hash string) {
	hashes := l.Hashes()
	if !slices.Contains(hashes, hash) {
		hashes = append(hashes, hash)
	}
	raw, _ := json.Marshal(hashes)
	l.TxHashes, l.TxHash = string(raw), &hash
}

// OrderStatusChange is one append-only row of an order's status history.
type OrderStatusChange struct {
	ID            string
	OrderID       string
	Status        orders.Status
	Reason        string
	CorrelationID string
	At            time.Time
}

func (OrderStatusChange) TableName() string { return "order_status_history" }

type orderStep struct {
	OrderID   string `gorm:"primaryKey"`
	Step      string `gorm:"primaryKey"`
	AppliedAt time.Time
}

func (orderStep) TableName() string { return "order_steps" }

// Event is one stored event of the outbox.
type Event struct {
	ID            string
	OrgID         string
	App           string
	Domain        string
	OrderID       string
	WalletID      string
	Sequence      int
	Event         string
	Leg           string
	Step          string
	Data          string
	CorrelationID string
	OccurredAt    time.Time
}

func (Event) TableName() string { return "events" }

// ErrTransition means the order is not in a status the step may start from.
var ErrTransition = errors.New("store: order is not in a status this step applies to")

// EventSpec describes the event a step emits.
type EventSpec struct {
	Name string
	// Leg marks a leg event with the position of its leg. The event names the leg, from the
	// locked order, when the order has more than one (SPEC 3.7).
	Leg *int
	// Body holds the event's own fields; the store fills those every event of an order
	// carries. Mutate may set some from the locked order.
	Body events.OrderEvent
}

// OrderChange is one lifecycle step applied to an order. The order workflow's activities
// take Step, From, To and the event's name from the step table in package orders.
type OrderChange struct {
	OrderID string
	// Step names the change uniquely within the order, e.g. "submitted" or "leg-1-broadcast".
	Step string
	// From lists the statuses the order may be in; empty allows any.
	From []orders.Status
	// To is the new status; empty leaves it.
	To     orders.Status
	Reason string
	// Mutate changes other fields of the locked order and its legs before they are saved.
	Mutate func(o *Order, legs []OrderLeg)
	// Also writes other rows that belong to the step, in the same transaction, given the
	// locked order and legs (after Mutate, which it may change further).
	Also          func(tx *Store, o *Order, legs []OrderLeg) error
	Event         *EventSpec
	CorrelationID string
	At            time.Time
}

// StepResult says what ApplyOrderStep did.
type StepResult struct {
	// Applied is false when the step had been applied before (a retry): nothing changed.
	Applied bool
	Order   *Order
	Legs    []OrderLeg
	// Event is the step's event, whether emitted now or by the earlier application.
	Event *Event
}

// CreateOrder stores a new draft order, its legs, its first history row and its
// Order.Created event, in one transaction.
// A non-nil audit record is written in the same transaction, and so is a non-nil answer:
// the request's Idempotency-Key record with the response to replay to its retries, so
// that the order and what answers its retries commit together or not at all, in one write
// transaction. A *KeyHeldError (ErrIdempotencyTaken) then means another request holds the
// key, and no order was created.
func (s *Store) CreateOrder(ctx context.Context, o *Order, legs []OrderLeg, created EventSpec, audit *AuditLog, answer *IdempotencyRecord) (*Event, error) {
	var ev *Event
	err := s.Tx(ctx, func(tx *Store) error {
		if audit != nil {
			if err := tx.AppendAudit(ctx, audit); err != nil {
				return err
			}
		}
		// The row is inserted as the created step leaves it (its event numbered 1), so the
		// step neither reads it back nor updates it.
		o.EventSequence = 1
		if _, err := tx.insert(ctx, o, insertOrFail); err != nil {
			return err
		}
		for i := range legs {
			legs[i].OrderID = o.ID
			if _, err := tx.insert(ctx, &legs[i], insertOrFail); err != nil {
				return err
			}
		}
		res, err := tx.applyStep(ctx, OrderChange{OrderID: o.ID, Step: orders.StepCreated.Name, To: o.Status, Reason: "created",
			Event: &created, CorrelationID: o.CorrelationID, At: o.CreatedAt}, &inserted{order: o, legs: legs})
		if err != nil {
			return err
		}
		ev = res.Event
		*o = *res.Order
		if answer != nil {
			return tx.storeAnswer(ctx, answer)
		}
		return nil
	})
	return ev, err
}

// ApplyOrderStep applies one lifecycle step in one transaction: the status change, its
// history row, other field changes and the step's event. Applying a step again (an
// activity retry) changes nothing and returns the event the first application emitted.
func (s *Store) ApplyOrderStep(ctx context.Context, ch OrderChange) (*StepResult, error) {
	var res *StepResult
	err := s.Tx(ctx, func(tx *Store) error {
		var err error
		res, err = tx.applyStep(ctx, ch, nil)
		return err
	})
	return res, err
}

// StepApplied reports whether an order's step (by its key) has been applied: a retried
// activity that talks to the outside before its step (a node, a signer) looks first.
func (s *Store) StepApplied(ctx context.Context, orderID, step string) (bool, error) {
	var n int64
	err := s.with(ctx).Model(&orderStep{}).Where("order_id = ? AND step = ?", orderID, step).Count(&n).Error
	return n > 0, err
}

// inserted is an order and its legs just inserted in this transaction, as its first step
// leaves them.
type inserted struct {
	order *Order
	legs  []OrderLeg
}

// applyStep applies a step to the order as stored, or, for the first step of an order
// inserted in the same transaction (created), to that order as inserted.
func (s *Store) applyStep(ctx context.Context, ch OrderChange, created *inserted) (*StepResult, error) {
	at := ch.At.UTC()
	if at.IsZero() {
		at = time.Now().UTC()
	}
	initial := created != nil
	var (
		o    *Order
		legs []OrderLeg
		err  error
	)
	if initial {
		o, legs = created.order, created.legs
	} else {
		// The order row is locked first: taking the step row first would hold a key-share
		// lock on the order (the foreign key) that concurrent steps then deadlock upgrading.
		if o, legs, err = s.lockOrder(ctx, ch.OrderID); err != nil {
			return nil, err
		}
	}
	stepped, err := s.insert(ctx, &orderStep{OrderID: ch.OrderID, Step: ch.Step, AppliedAt: at}, insertOrSkip)
	if err != nil {
		return nil, err
	}
	if stepped == 0 {
		res := &StepResult{Order: o, Legs: legs}
		var ev Event
		err := s.with(ctx).Where("order_id = ? AND step = ?", ch.OrderID, ch.Step).Take(&ev).Error
		if err == nil {
			res.Event = &ev
		} else if !errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, err
		}
		return res, nil
	}
	if len(ch.From) > 0 && !slices.Contains(ch.From, o.Status) {
		return nil, fmt.Errorf("%w: %s is %s, step %s needs one of %v", ErrTransition, o.ID, o.Status, ch.Step, ch.From)
	}
	before := snapshot(legs)
	if ch.Mutate != nil {
		ch.Mutate(o, legs)
	}
	if ch.Also != nil {
		if err := ch.Also(s, o, legs); err != nil {
			return nil, err
		}
	}
	if ch.To != "" && (ch.To != o.Status || initial) {
		o.Status = ch.To
		_, err := s.insert(ctx, &OrderStatusChange{ID: ids.New("osh"), OrderID: o.ID, Status: ch.To, Reason: ch.Reason,
			CorrelationID: ch.CorrelationID, At: at}, insertOrFail)
		if err != nil {
			return nil, err
		}
	}
	res := &StepResult{Applied: true, Order: o, Legs: legs}
	if ch.Event != nil {
		if !initial {
			o.EventSequence++
		}
		ev, err := newEvent(o, legs, ch, at)
		if err != nil {
			return nil, err
		}
		if _, err := s.insert(ctx, ev, insertOrFail); err != nil {
			return nil, err
		}
		if err := s.eventAppended(ctx, ev.ID, ev.Event); err != nil {
			return nil, err
		}
		if err := s.queueWebhooks(ctx, ev); err != nil {
			return nil, err
		}
		res.Event = ev
	}
	if initial {
		return res, nil
	}
	o.UpdatedAt = at
	db := s.with(ctx)
	if err := db.Model(o).Select("*").Omit("id", "created_at").Updates(o).Error; err != nil {
		return nil, err
	}
	for i := range legs {
		if sameLeg(legs[i], before[i]) {
			continue
		}
		// The key is spelled out: gorm drops a zero primary key (position 0) from the
		// conditions it derives from a model, which would write every leg of the order.
		l := &legs[i]
		err := db.Model(&OrderLeg{}).Where("order_id = ? AND position = ?", l.OrderID, l.Position).
			Updates(map[string]any{"leg": l.Leg, "status": l.Status, "signing_request_id": l.SigningRequestID,
				"tx_hash": l.TxHash, "tx_hashes": l.TxHashes}).Error
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// snapshot copies legs, what their pointers point to included.
func snapshot(legs []OrderLeg) []OrderLeg {
	out := slices.Clone(legs)
	for i := range out {
		out[i].SigningRequestID = copyOf(out[i].SigningRequestID)
		out[i].TxHash = copyOf(out[i].TxHash)
	}
	return out
}

func copyOf(p *string) *string {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// sameLeg: a step left the leg as it was, so it needs no write.
func sameLeg(a, b OrderLeg) bool {
	same := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Leg == b.Leg && a.Status == b.Status && a.TxHashes == b.TxHashes &&
		same(a.SigningRequestID, b.SigningRequestID) && same(a.TxHash, b.TxHash)
}

// newEvent builds the event of a step: the standard fields of SPEC 3.7, then the step's own.
func newEvent(o *Order, legs []OrderLeg, ch OrderChange, at time.Time) (*Event, error) {
	ev := &Event{ID: ids.New(ids.Event), OrgID: o.OrgID, App: o.App, Domain: o.Domain, OrderID: o.ID, WalletID: o.WalletID,
		Sequence: o.EventSequence, Event: ch.Event.Name, Step: ch.Step, CorrelationID: ch.CorrelationID, OccurredAt: at}
	body := ch.Event.Body
	if pos := ch.Event.Leg; pos != nil && *pos < len(legs) {
		// A batch payment's leg events say which part they are of, however many parts.
		if p, ok := o.Details.Details.(*orders.Payment); ok && p.IsBatch() {
			ev.Leg, body.Part = legs[*pos].Leg, *pos+1
		} else if len(legs) > 1 {
			ev.Leg = legs[*pos].Leg
		}
	}
	body.ID, body.Event, body.Domain, body.OrderID, body.WalletID = ev.ID, ev.Event, ev.Domain, ev.OrderID, ev.WalletID
	body.OrderStatus, body.Sequence, body.CorrelationID = string(o.Status), ev.Sequence, ev.CorrelationID
	body.OccurredAt, body.Leg = events.TimeOf(at), ev.Leg
	b, err := events.Encode(&body)
	if err != nil {
		return nil, err
	}
	ev.Data = string(b)
	return ev, nil
}

// lockOrder reads an order and its legs, holding the row until the transaction ends so
// that concurrent steps of one order apply one after the other. (SQLite write
// transactions already hold the database lock from their start.)
func (s *Store) lockOrder(ctx context.Context, id string) (*Order, []OrderLeg, error) {
	return s.orderWithLegs(ctx, s.forUpdate(ctx).Where("id = ?", id))
}

// inWallets narrows q to the rows whose column names one of walletIDs, and leaves it as it
// is when there are none: a resource-restricted key's lists hold only its wallets' rows,
// an unrestricted credential's every row.
func inWallets(q *gorm.DB, column string, walletIDs []string) *gorm.DB {
	switch len(walletIDs) {
	case 0:
		return q
	case 1:
		// An equality, not IN of one, lets SQLite take the rows in an index's order
		// (wallet, status, id) instead of sorting them.
		return q.Where(column+" = ?", walletIDs[0])
	}
	return q.Where(column+" IN ?", walletIDs)
}

// ordersOfWallets is a subquery of the ids of orders from these wallets: how a
// resource-restricted key's lists are narrowed.
func (s *Store) ordersOfWallets(ctx context.Context, walletIDs []string) *gorm.DB {
	return s.with(ctx).Model(&Order{}).Select("id").Where("wallet_id IN ?", walletIDs)
}

// Order returns an order by id, with its legs.
func (s *Store) Order(ctx context.Context, id string) (*Order, []OrderLeg, error) {
	return s.orderWithLegs(ctx, s.with(ctx).Where("id = ?", id))
}

// OrderInApp returns an order of an organisation's app; any other is not found.
func (s *Store) OrderInApp(ctx context.Context, orgID, app, id string) (*Order, []OrderLeg, error) {
	return s.orderWithLegs(ctx, s.with(ctx).Where("id = ? AND org_id = ? AND app = ?", id, orgID, app))
}

// orderWithLegs reads the one order q selects, then its legs in order.
func (s *Store) orderWithLegs(ctx context.Context, q *gorm.DB) (*Order, []OrderLeg, error) {
	var o Order
	if err := q.Take(&o).Error; err != nil {
		return nil, nil, notFound(err)
	}
	legs, err := s.LegsOf(ctx, []string{o.ID})
	return &o, legs[o.ID], err
}

// LegsOf returns the legs of several orders, by order id, in leg order.
func (s *Store) LegsOf(ctx context.Context, orderIDs []string) (map[string][]OrderLeg, error) {
	var legs []OrderLeg
	if err := s.with(ctx).Where("order_id IN ?", orderIDs).Order("order_id, position").Find(&legs).Error; err != nil {
		return nil, err
	}
	out := make(map[string][]OrderLeg, len(orderIDs))
	for _, l := range legs {
		out[l.OrderID] = append(out[l.OrderID], l)
	}
	return out, nil
}

// OrderHistory returns an order's status history, oldest first.
func (s *Store) OrderHistory(ctx context.Context, orderID string) ([]OrderStatusChange, error) {
	var out []OrderStatusChange
	err := s.with(ctx).Where("order_id = ?", orderID).Order("id").Find(&out).Error
	return out, err
}

// OrderFilter selects orders of one app of an organisation.
type OrderFilter struct {
	OrgID, App   string
	Status       string
	CreatedAfter *time.Time
	AfterID      string
	Limit        int
}

// ListOrders pages through orders newest first; AfterID continues below that id.
func (s *Store) ListOrders(ctx context.Context, f OrderFilter) ([]Order, error) {
	q := s.with(ctx).Where("org_id = ? AND app = ?", f.OrgID, f.App)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.CreatedAfter != nil {
		q = q.Where("created_at > ?", f.CreatedAfter.UTC())
	}
	return page[Order](q, f.AfterID, newestFirst, f.Limit)
}

// EventFilter selects stored events of an organisation's apps.
type EventFilter struct {
	OrgID string
	Apps  []string
	// WalletIDs, when set, keeps only events of orders from these wallets.
	WalletIDs []string
	OrderID   string
	AfterID   string
	Limit     int
}

// ListEvents pages through stored events oldest first, after an event id. One order's
// events come in sequence order (ids are minted by several processes, sequences are not).
func (s *Store) ListEvents(ctx context.Context, f EventFilter) ([]Event, error) {
	// The orders' events only: an app's own events (Policy.Published) reach the configs that
	// name them, and the policy's versions are their record.
	q := s.with(ctx).Where("org_id = ? AND app IN ? AND order_id IS NOT NULL", f.OrgID, f.Apps)
	if len(f.WalletIDs) > 0 {
		q = q.Where("order_id IN (?)", s.ordersOfWallets(ctx, f.WalletIDs))
	}
	order := "id"
	if f.OrderID != "" {
		q = q.Where("order_id = ?", f.OrderID)
		order = "sequence"
		if f.AfterID != "" {
			var after Event
			if err := s.with(ctx).Select("sequence").Where("id = ? AND order_id = ?", f.AfterID, f.OrderID).Take(&after).Error; err == nil {
				q = q.Where("sequence > ?", after.Sequence)
			} else {
				q = q.Where("id > ?", f.AfterID)
			}
		}
	} else if s.dialect == migrations.Postgres {
		return s.listStream(ctx, q, f)
	} else if f.AfterID != "" {
		// SQLite: one writer at a time, and every event is written after its transaction's
		// first write took the lock, so ids are minted in commit order.
		q = q.Where("id > ?", f.AfterID)
	}
	var out []Event
	err := q.Order(order).Limit(f.Limit).Find(&out).Error
	return out, err
}

// listStream pages the whole stream on PostgreSQL, where several processes commit events
// at once and an event's id (minted inside its transaction) can be older than that of an
// event committed before it. Events go in the order their transactions began, and only
// those of transactions older than every transaction still open on the database: one
// still open may yet commit events, all of which will sort after what is answered now.
// The horizon is read before the events, so a transaction that commits in between is
// either visible or past the horizon.
func (s *Store) listStream(ctx context.Context, q *gorm.DB, f EventFilter) ([]Event, error) {
	var horizon time.Time
	err := s.with(ctx).Raw(`SELECT COALESCE(min(xact_start), clock_timestamp()) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`).Scan(&horizon).Error
	if err != nil {
		return nil, err
	}
	q = q.Where("tx_started_at < ?", horizon)
	if f.AfterID != "" {
		// After the cursor's event in this order; a cursor that names no event goes by id,
		// as on SQLite. The cursor's place is read first, so that the page starts there in
		// the index: a condition that could also hold by id is a filter, and a page a
		// million events deep would pass over every event before it.
		var after []time.Time
		if err := s.with(ctx).Raw(`SELECT tx_started_at FROM events WHERE id = ?`, f.AfterID).Scan(&after).Error; err != nil {
			return nil, err
		}
		if len(after) == 1 {
			q = q.Where("(tx_started_at, id) > (?, ?)", after[0], f.AfterID)
		} else {
			q = q.Where("id > ?", f.AfterID)
		}
	}
	var out []Event
	err = q.Order("tx_started_at, id").Limit(f.Limit).Find(&out).Error
	return out, err
}

// OrderEvents returns every event of an order in sequence order.
func (s *Store) OrderEvents(ctx context.Context, orderID string) ([]Event, error) {
	var out []Event
	err := s.with(ctx).Where("order_id = ?", orderID).Order("sequence").Find(&out).Error
	return out, err
}
