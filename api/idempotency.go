package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/internal/metrics"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/store"
)

const (
	idempotencyHeader = "Idempotency-Key"
	replayedHeader    = "Idempotent-Replayed"
	problemCodeKey    = "treasury.problemCode"
)

// keptProblemCodes are the errors a retry would meet again, because the request ran and
// its outcome depended on state: they are kept and replayed. Any other error (bad
// credentials, invalid input, not found, overload, a failure on our side) releases the key,
// so a corrected or later retry runs anew.
var keptProblemCodes = map[string]bool{
	apitypes.CodeConflict: true, apitypes.CodeAlreadyDecided: true, apitypes.CodePolicyViolation: true, apitypes.CodeInvalidSignature: true, apitypes.CodeMakerChecker: true,
}

// replayedHeaders are the response headers stored with a kept response.
var replayedHeaders = []string{"Content-Type", "Location"}

// idempotencyStore keeps the Idempotency-Key records (*store.Store).
type idempotencyStore interface {
	IdempotencyRecordOf(ctx context.Context, orgID, key string) (*store.IdempotencyRecord, error)
	ClaimIdempotencyKey(ctx context.Context, rec *store.IdempotencyRecord, abandonedBefore time.Time) (*store.IdempotencyRecord, error)
	CompleteIdempotencyKey(ctx context.Context, orgID, key string, createdAt time.Time, status int, headers string, body []byte) error
	ReleaseIdempotencyKey(ctx context.Context, orgID, key string, createdAt time.Time) error
}

// idempotency implements Idempotency-Key on writes (SPEC section 2): the first response is
// stored for the retention period and replayed to a repeat of the same request; the same
// key with another request is 422, and while the first is still running 409.
type idempotency struct {
	store     idempotencyStore
	log       *slog.Logger
	retention time.Duration
	// lease is how long an in-flight claim is honoured; a request that held it longer died.
	lease time.Duration
	now   func() time.Time
	// metrics counts the replays.
	metrics *metrics.Metrics
	// folded are the routes (gin full paths of POSTs) whose record the created order's own
	// transaction stores: the order creates.
	folded map[string]bool
}

func (m *idempotency) handle(c *gin.Context) {
	if c.Request.Method == http.MethodPost && m.folded[c.FullPath()] {
		// An order create: its handler folds the record into the order's transaction
		// (folding).
		c.Next()
		return
	}
	rec, ok := m.recordOf(c)
	switch {
	case !ok:
	case rec == nil:
		c.Next()
	default:
		m.claimAndRun(c, rec, c.Next)
	}
}

// recordOf is the Idempotency-Key record a write asks for: nil without a key, or for a
// read. It reports false when it has answered the request itself (an invalid key, a body
// it could not read).
func (m *idempotency) recordOf(c *gin.Context) (*store.IdempotencyRecord, bool) {
	key := c.GetHeader(idempotencyHeader)
	switch c.Request.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil, true
	}
	if key == "" {
		return nil, true
	}
	if !validIdempotencyKey(key) {
		validationFailed(c, []orders.FieldError{{Field: idempotencyHeader, Message: "must be 1 to 255 printable ASCII characters"}})
		return nil, false
	}
	body, ok := readBody(c)
	if !ok {
		return nil, false
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	target := c.Request.URL.RequestURI()
	// The credential is part of the request: another key of the organisation reusing the
	// key gets 422, never the first caller's stored answer.
	sum := sha256.Sum256([]byte(principalOf(c).ID + "\n" + c.Request.Method + "\n" + target + "\n" + string(body)))
	now := m.now().UTC()
	return &store.IdempotencyRecord{
		OrgID: principalOf(c).OrgID, Key: key, Method: c.Request.Method, Path: target,
		Fingerprint: hex.EncodeToString(sum[:]), CreatedAt: now, ExpiresAt: now.Add(m.retention),
	}, true
}

// claimAndRun claims rec's key and runs the request, keeping its answer for the retries;
// a key held already is answered from its record.
func (m *idempotency) claimAndRun(c *gin.Context, rec *store.IdempotencyRecord, run func()) {
	held, err := m.store.ClaimIdempotencyKey(c.Request.Context(), rec, rec.CreatedAt.Add(-m.lease))
	if errors.Is(err, store.ErrIdempotencyTaken) {
		m.answerFromRecord(c, held, rec)
		return
	}
	if err != nil {
		requestFailed(c, m.log, err)
		return
	}
	capture := &capturingWriter{ResponseWriter: c.Writer}
	c.Writer = capture
	run()
	m.record(c, rec, capture)
}

// foldedCreate answers an order create: claim, when not nil, is the request's record for
// the order's transaction to store with its answer. It returns the record that took the
// key meanwhile, having answered nothing.
type foldedCreate func(c *gin.Context, claim *store.IdempotencyRecord) (held *store.IdempotencyRecord)

// folding serves an order create under its Idempotency-Key. A key no record holds yet is
// handed to the create, whose transaction stores the record, done, with the order, so that
// no crash can leave an order without the record that answers its retries, nor a record
// claimed for an order never made. A key a record holds is claimed as for any write.
func (m *idempotency) folding(create foldedCreate) gin.HandlerFunc {
	return func(c *gin.Context) {
		rec, ok := m.recordOf(c)
		if !ok {
			return
		}
		if rec == nil {
			create(c, nil)
			return
		}
		held, err := m.store.IdempotencyRecordOf(c.Request.Context(), rec.OrgID, rec.Key)
		if err != nil {
			requestFailed(c, m.log, err)
			return
		}
		if held != nil {
			// Done, in flight, or stale: the claim answers it.
			m.claimAndRun(c, rec, func() { create(c, nil) })
			return
		}
		m.fold(c, rec, create)
	}
}

// fold runs an order create with rec, the record its transaction stores.
func (m *idempotency) fold(c *gin.Context, rec *store.IdempotencyRecord, create foldedCreate) {
	capture := &capturingWriter{ResponseWriter: c.Writer}
	c.Writer = capture
	held := create(c, rec)
	switch {
	case held != nil:
		// Another request with the key committed first; no record held the key when this
		// one began, so it was still running then: 409, as for any write (422 if it was
		// another request). A retry gets its answer. The handler wrote nothing.
		inFlight := *held
		inFlight.State = store.IdempotencyInFlight
		m.answerFromRecord(c, &inFlight, rec)
	case capture.Status() == http.StatusCreated:
		// Stored with the order.
	case kept(capture.Status(), c.GetString(problemCodeKey)):
		// No order was made, and a retry would meet this answer again: keep it, as any
		// other write's (a refusal that depends on state, say).
		fresh := *rec
		fresh.StatusCode, fresh.ResponseHeaders, fresh.ResponseBody = 0, "", nil
		if _, err := m.store.ClaimIdempotencyKey(c.Request.Context(), &fresh, rec.CreatedAt.Add(-m.lease)); err != nil {
			m.log.Warn("idempotency record not kept", "correlationId", correlationID(c), "error", err.Error())
			return
		}
		m.record(c, &fresh, capture)
	}
}

// kept reports whether a response is one to keep for the request's retries: a success, or
// a refusal that depends on state (keptProblemCodes).
func kept(status int, code string) bool {
	return status < 500 && (code == "" || keptProblemCodes[code])
}

// record stores the outcome of the request that holds rec's claim: the response to keep,
// or the claim released.
func (m *idempotency) record(c *gin.Context, rec *store.IdempotencyRecord, capture *capturingWriter) {
	status := capture.Status()
	code := c.GetString(problemCodeKey)
	var record func(ctx context.Context) error
	if !kept(status, code) {
		record = func(ctx context.Context) error {
			return m.store.ReleaseIdempotencyKey(ctx, rec.OrgID, rec.Key, rec.CreatedAt)
		}
	} else {
		headers := map[string]string{}
		for _, h := range replayedHeaders {
			if v := capture.Header().Get(h); v != "" {
				headers[h] = v
			}
		}
		encoded, _ := json.Marshal(headers)
		body := capture.body.Bytes()
		if kept, ok := c.Get(keptBodyKey); ok {
			body = kept.([]byte)
		}
		record = func(ctx context.Context) error {
			return m.store.CompleteIdempotencyKey(ctx, rec.OrgID, rec.Key, rec.CreatedAt, status, string(encoded), body)
		}
	}
	// The outcome must be recorded even when the client has gone away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 5*time.Second)
	defer cancel()
	if err := record(ctx); err != nil {
		m.log.Error("idempotency record not updated; retrying", "correlationId", correlationID(c), "error", err.Error())
		go m.recordLater(record, correlationID(c))
	}
}

// recordLater retries recording a request's outcome that the database refused (it was
// restarting, say), until the claim's lease would end anyway. Without it the retries of
// the request would hear idempotency_key_in_use for the whole lease.
func (m *idempotency) recordLater(record func(ctx context.Context) error, correlationID string) {
	deadline := m.now().Add(m.lease)
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		time.Sleep(wait)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := record(ctx)
		cancel()
		if err == nil {
			m.log.Info("idempotency record updated on a retry", "correlationId", correlationID)
			return
		}
		if m.now().After(deadline) {
			m.log.Error("idempotency record not updated; its lease ends it", "correlationId", correlationID, "error", err.Error())
			return
		}
	}
}

// answerFromRecord answers a request whose key is held by an earlier one.
func (m *idempotency) answerFromRecord(c *gin.Context, held, req *store.IdempotencyRecord) {
	switch {
	case held.Method != req.Method || held.Path != req.Path || held.Fingerprint != req.Fingerprint:
		fail(c, apitypes.CodeIdempotencyKeyReused, "This Idempotency-Key was used with a different request; use a new key for a new request.")
	case held.State != store.IdempotencyDone:
		fail(c, apitypes.CodeIdempotencyKeyInUse, "A request with this Idempotency-Key is still being processed; retry shortly.")
	default:
		var headers map[string]string
		_ = json.Unmarshal([]byte(held.ResponseHeaders), &headers)
		for k, v := range headers {
			c.Header(k, v)
		}
		m.metrics.IdempotencyReplay()
		c.Header(replayedHeader, "true")
		c.Status(held.StatusCode)
		_, _ = c.Writer.Write(held.ResponseBody)
		c.Abort()
	}
}

func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// capturingWriter keeps a copy of the response body as it is written.
type capturingWriter struct {
	gin.ResponseWriter
	body bytes.Buffer
}

func (w *capturingWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *capturingWriter) WriteString(s string) (int, error) {
	w.body.WriteString(s)
	return w.ResponseWriter.WriteString(s)
}
