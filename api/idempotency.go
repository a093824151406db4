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
	"github.com/opentreasury/treasury/metrics"
	"github.com/opentreasury/treasury/orders"
	"github.com/opentreasury/treasury/store"
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

// idempotency implements Idempotency-Key on writes (SPEC section 2): the first response is
// stored for the retention period and replayed to a repeat of the same request; the same
// key with another request is 422, and while the first is still running 409.
type idempotency struct {
	store     *store.Store
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

// foldedKey holds a folded request's store.FoldedIdempotency for its handler.
const foldedKey = "treasury.foldedIdempotency"

// foldedIdempotency is the record the handler of an order create hands to the store, nil
// when the request has no Idempotency-Key.
func foldedIdempotency(c *gin.Context) *store.FoldedIdempotency {
	f, _ := c.Get(foldedKey)
	folded, _ := f.(*store.FoldedIdempotency)
	return folded
}

func (m *idempotency) handle(c *gin.Context) {
	key := c.GetHeader(idempotencyHeader)
	switch c.Request.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		c.Next()
		return
	}
	if key == "" {
		c.Next()
		return
	}
	if !validIdempotencyKey(key) {
		validationFailed(c, []orders.FieldError{{Field: idempotencyHeader, Message: "must be 1 to 255 printable ASCII characters"}})
		return
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			fail(c, apitypes.CodePayloadTooLarge, "The request body is larger than 1 MiB.")
			return
		}
		fail(c, apitypes.CodeValidationFailed, "The request body could not be read.")
		return
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	target := c.Request.URL.RequestURI()
	// The credential is part of the request: another key of the organisation reusing the
	// key gets 422, never the first caller's stored answer.
	sum := sha256.Sum256([]byte(principalOf(c).ID + "\n" + c.Request.Method + "\n" + target + "\n" + string(body)))
	fingerprint := hex.EncodeToString(sum[:])

	now := m.now().UTC()
	rec := &store.IdempotencyRecord{
		OrgID: principalOf(c).OrgID, Key: key, Method: c.Request.Method, Path: target,
		Fingerprint: fingerprint, CreatedAt: now, ExpiresAt: now.Add(m.retention),
	}
	if c.Request.Method == http.MethodPost && m.folded[c.FullPath()] {
		held, err := m.store.IdempotencyRecordOf(c.Request.Context(), rec.OrgID, rec.Key)
		if err != nil {
			requestFailed(c, m.log, err)
			return
		}
		if held == nil {
			m.fold(c, rec, now)
			return
		}
		// A record holds the key (done, in flight, or stale): the claim below answers it.
	}
	held, err := m.store.ClaimIdempotencyKey(c.Request.Context(), rec, now.Add(-m.lease))
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
	c.Next()
	m.record(c, rec, capture)
}

// fold runs an order create whose key no record holds yet: the order's transaction stores
// the record, done (store.FoldedIdempotency), so that no crash can leave an order without
// the record that answers its retries, nor a record claimed for an order never made.
func (m *idempotency) fold(c *gin.Context, rec *store.IdempotencyRecord, now time.Time) {
	f := &store.FoldedIdempotency{Record: rec}
	c.Set(foldedKey, f)
	capture := &capturingWriter{ResponseWriter: c.Writer}
	c.Writer = capture
	c.Next()
	switch {
	case f.Held != nil:
		// Another request with the key committed first; no record held the key when this
		// one began, so it was still running then: 409, as for any write (422 if it was
		// another request). A retry gets its answer. The handler wrote nothing.
		held := *f.Held
		held.State = store.IdempotencyInFlight
		m.answerFromRecord(c, &held, rec)
	case f.Stored:
	case kept(capture.Status(), c.GetString(problemCodeKey)):
		// No order was made, and a retry would meet this answer again: keep it, as any
		// other write's (a refusal that depends on state, say).
		fresh := *rec
		if _, err := m.store.ClaimIdempotencyKey(c.Request.Context(), &fresh, now.Add(-m.lease)); err != nil {
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
