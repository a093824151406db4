package events

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"
)

var at = time.Date(2026, 11, 25, 16, 21, 56, 719_400_000, time.FixedZone("CET", 3600))

func orderEvent(name, status string, seq int) OrderEvent {
	return OrderEvent{ID: "evt_1", Event: name, Domain: "payment", OrderID: "ord_1", WalletID: "wal_1", OrderStatus: status,
		Sequence: seq, CorrelationID: "c1", OccurredAt: TimeOf(at)}
}

// Each event's body is written exactly as the outbox has always stored it: its fields and
// no others, null where null, with sorted keys.
func TestBodiesAreWrittenAsStored(t *testing.T) {
	created := orderEvent(OrderCreated, "draft", 1)
	none, person := NullableString(""), NullableString("usr_1")
	created.AmountUSD, created.Chain, created.CreatedBy, created.CreatedByUser = "500.00", "ethereum", "key_1", &none
	byPerson := created
	byPerson.CreatedByUser = &person
	approved := orderEvent(OrderApproved, "approved", 3)
	approved.Quorum = 2
	byPolicy := orderEvent(OrderRejected, "rejected", 3)
	byPolicy.Reason, byPolicy.Violations = "policy", []Violation{{Rule: "maxOrderUsd", Message: "too much"}}
	byApprover := orderEvent(OrderRejected, "rejected", 4)
	byApprover.Reason, byApprover.DecidedBy = "approver", "key_2"
	requested := orderEvent(WalletSigningRequested, "pending_signature", 3)
	requested.SigningRequestID, requested.ExpiresAt = "sig_1", TimeOf(at.Add(24*time.Hour))
	confirmed := orderEvent(OrderConfirmed, "confirmed", 9)
	confirmed.Leg, confirmed.TxHash = "SWAP", "0xabc"
	failed := orderEvent(OrderFailed, "failed", 6)
	failed.Failure = &Failure{Code: "tx_reverted", Message: "reverted"}

	for _, tc := range []struct {
		body Body
		want string
	}{
		{&created, `{"amountUsd":"500.00","chain":"ethereum","correlationId":"c1","createdBy":"key_1","createdByUser":null,"domain":"payment","event":"Order.Created","id":"evt_1","occurredAt":"2026-11-25T15:21:56.719Z","orderId":"ord_1","orderStatus":"draft","sequence":1,"walletId":"wal_1"}`},
		{&byPerson, `{"amountUsd":"500.00","chain":"ethereum","correlationId":"c1","createdBy":"key_1","createdByUser":"usr_1","domain":"payment","event":"Order.Created","id":"evt_1","occurredAt":"2026-11-25T15:21:56.719Z","orderId":"ord_1","orderStatus":"draft","sequence":1,"walletId":"wal_1"}`},
		{&approved, `{"correlationId":"c1","domain":"payment","event":"Order.Approved","id":"evt_1","occurredAt":"2026-11-25T15:21:56.719Z","orderId":"ord_1","orderStatus":"approved","quorum":2,"sequence":3,"walletId":"wal_1"}`},
		{&byPolicy, `{"correlationId":"c1","domain":"payment","event":"Order.Rejected","id":"evt_1","occurredAt":"2026-11-25T15:21:56.719Z","orderId":"ord_1","orderStatus":"rejected","reason":"policy","sequence":3,"violations":[{"rule":"maxOrderUsd","message":"too much"}],"walletId":"wal_1"}`},
		{&byApprover, `{"correlationId":"c1","decidedBy":"key_2","domain":"payment","event":"Order.Rejected","id":"evt_1","occurredAt":"2026-11-25T15:21:56.719Z","orderId":"ord_1","orderStatus":"rejected","reason":"approver","sequence":4,"walletId":"wal_1"}`},
		{&requested, `{"correlationId":"c1","domain":"payment","event":"Wallet.SigningRequested","expiresAt":"2026-11-26T15:21:56.719Z","id":"evt_1","occurredAt":"2026-11-25T15:21:56.719Z","orderId":"ord_1","orderStatus":"pending_signature","sequence":3,"signingRequestId":"sig_1","walletId":"wal_1"}`},
		{&confirmed, `{"correlationId":"c1","domain":"payment","event":"Order.Confirmed","id":"evt_1","leg":"SWAP","occurredAt":"2026-11-25T15:21:56.719Z","orderId":"ord_1","orderStatus":"confirmed","sequence":9,"txHash":"0xabc","walletId":"wal_1"}`},
		{&failed, `{"correlationId":"c1","domain":"payment","event":"Order.Failed","failure":{"code":"tx_reverted","message":"reverted"},"id":"evt_1","occurredAt":"2026-11-25T15:21:56.719Z","orderId":"ord_1","orderStatus":"failed","sequence":6,"walletId":"wal_1"}`},
		{&TestEvent{ID: "evt_2", Event: WebSocketTest, ConfigID: "wsc_1", App: "pay", CorrelationID: "c2", OccurredAt: TimeOf(at)},
			`{"app":"pay","configId":"wsc_1","correlationId":"c2","event":"websocket.test","id":"evt_2","occurredAt":"2026-11-25T15:21:56.719Z"}`},
		{&TestEvent{ID: "evt_3", Event: WebhookTest, WebhookID: "whk_1", App: "pay", CorrelationID: "c3", OccurredAt: TimeOf(at)},
			`{"app":"pay","correlationId":"c3","event":"webhook.test","id":"evt_3","occurredAt":"2026-11-25T15:21:56.719Z","webhookId":"whk_1"}`},
	} {
		got, err := Encode(tc.body)
		if err != nil || string(got) != tc.want {
			t.Errorf("Encode =\n%s, %v\nwant\n%s", got, err, tc.want)
		}
	}
}

// A field added out of order would change the order of every body's keys: each body type
// declares its fields sorted by JSON name.
func TestBodyFieldsAreSortedByName(t *testing.T) {
	full := OrderEvent{AmountUSD: "1", Chain: "c", CorrelationID: "c", CreatedBy: "k", CreatedByUser: new(NullableString),
		DecidedBy: "d", Domain: "d", Event: "e", ExpiresAt: TimeOf(at), Failure: &Failure{}, ID: "i", Leg: "l",
		OccurredAt: TimeOf(at), OrderID: "o", OrderStatus: "s", Quorum: 1, Reason: "r", Sequence: 1, SigningRequestID: "s",
		TxHash: "t", Violations: []Violation{{}}, WalletID: "w"}
	test := TestEvent{App: "a", ConfigID: "c", CorrelationID: "c", Event: "e", ID: "i", OccurredAt: TimeOf(at), WebhookID: "w"}
	for _, b := range []Body{&full, &test} {
		raw, err := Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		keys := topLevelKeys(t, raw)
		if !slices.IsSorted(keys) {
			t.Errorf("%T writes its keys unsorted: %v", b, keys)
		}
	}
}

func topLevelKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			continue
		case json.Delim('}'), json.Delim(']'):
			depth--
			continue
		}
		if s, ok := tok.(string); ok && depth == 1 {
			keys = append(keys, s)
			// Skip the value: a nested one is walked at a greater depth.
			if tok, err := dec.Token(); err == nil {
				if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
					depth++
				}
			}
		}
	}
}

func TestTime(t *testing.T) {
	b, err := json.Marshal(struct {
		At    Time  `json:"at"`
		Unset *Time `json:"unset"`
	}{TimeOf(at), TimeOrNil(nil)})
	if err != nil || string(b) != `{"at":"2026-11-25T15:21:56.719Z","unset":null}` {
		t.Fatalf("got %s, %v", b, err)
	}
	var back struct{ At Time }
	if err := json.Unmarshal([]byte(`{"At":"2026-11-25T15:21:56.719Z"}`), &back); err != nil || !back.At.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("read back %v, %v", back.At, err)
	}
}
