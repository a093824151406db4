package api

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opentreasury/treasury/apitypes"
	"github.com/opentreasury/treasury/auditchain"
	"github.com/opentreasury/treasury/internal/orders"
	"github.com/opentreasury/treasury/internal/service"
	"github.com/opentreasury/treasury/internal/store"
)

const (
	// jsonLinesType is the media type of an export: one JSON object a line.
	jsonLinesType = "application/jsonl"
	// nextCursorHeader carries an export's cursor: its body has no room for one.
	nextCursorHeader = "Next-Cursor"
	// Entries of one export answer: a bound on its time within the request deadline.
	defaultExportLimit = 1000
	maxExportLimit     = 10000
)

func auditJSON(a *store.AuditLog) apitypes.AuditLog {
	details := json.RawMessage(a.Details)
	if !json.Valid(details) {
		details = json.RawMessage(`{}`)
	}
	return apitypes.AuditLog{Record: a.Record(details), Seq: a.Seq, PrevHash: a.PrevHash, Hash: a.Hash}
}

// auditLogs answers GET /audit-logs: newest first, with the head of the organisation's
// audit chain.
func (h *recordHandlers) auditLogs(c *gin.Context) {
	pg, ok := pageOrRefuse(c)
	if !ok {
		return
	}
	ctx, who := c.Request.Context(), caller(c)
	list, next, err := h.svc.AuditLogs(ctx, who, pg)
	if err != nil {
		failed(c, h.log, err)
		return
	}
	// Read after the page: the head is then at or after every record on it.
	head, err := h.svc.AuditChainHead(ctx, who)
	if err != nil {
		failed(c, h.log, err)
		return
	}
	out := make([]apitypes.AuditLog, len(list))
	for i := range list {
		out[i] = auditJSON(&list[i])
	}
	c.PureJSON(http.StatusOK, apitypes.AuditLogPage{Page: apitypes.Page[apitypes.AuditLog]{Data: out, NextCursor: encodeCursor(next)}, ChainHead: head})
}

// exportAuditLog answers GET /audit-logs/export?since=&until=&cursor=&limit=: a run of
// the organisation's audit chain, oldest first, one entry a line, written as it is read
// (a long chain is never held whole). Next-Cursor continues the window when the run
// stopped at the limit.
func (h *recordHandlers) exportAuditLog(c *gin.Context) {
	f, errs := exportParams(c)
	if len(errs) > 0 {
		validationFailed(c, errs)
		return
	}
	ctx := c.Request.Context()
	run, err := h.svc.ExportAuditLog(ctx, caller(c), f)
	if err != nil {
		failed(c, h.log, err)
		return
	}
	if run.Next != 0 {
		c.Header(nextCursorHeader, string(encodeCursor(strconv.FormatInt(run.Next, 10))))
	}
	c.Header("Content-Type", jsonLinesType)
	c.Status(http.StatusOK)
	enc := json.NewEncoder(c.Writer)
	// Details as stored, "<" and all: a verifier re-encodes them canonically either way.
	enc.SetEscapeHTML(false)
	err = run.Pages(ctx, func(page []auditchain.Entry) error {
		for i := range page {
			if err := enc.Encode(&page[i]); err != nil {
				return err
			}
		}
		c.Writer.Flush()
		return nil
	})
	if err != nil {
		// The status is sent: break the connection, so that the client sees a failed
		// answer rather than a run that merely looks short.
		h.log.Error("audit export failed midway", "correlationId", correlationID(c), "error", err.Error())
		panic(http.ErrAbortHandler)
	}
}

// exportParams reads an export's window, cursor and limit.
func exportParams(c *gin.Context) (service.AuditExportFilter, []orders.FieldError) {
	var errs []orders.FieldError
	f := service.AuditExportFilter{Limit: defaultExportLimit}
	when := func(name string) time.Time {
		raw := c.Query(name)
		if raw == "" {
			return time.Time{}
		}
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			errs = append(errs, orders.FieldError{Field: name, Message: "must be an ISO 8601 timestamp such as 2026-11-22T01:24:34.123Z"})
		}
		return t
	}
	f.Since, f.Until = when("since"), when("until")
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		errs = append(errs, orders.FieldError{Field: "until", Message: "must be later than since"})
	}
	if raw, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxExportLimit {
			errs = append(errs, orders.FieldError{Field: "limit", Message: "must be an integer from 1 to " + strconv.Itoa(maxExportLimit)})
		}
		f.Limit = n
	}
	if raw := c.Query("cursor"); raw != "" {
		b, err := base64.RawURLEncoding.DecodeString(raw)
		seq, perr := strconv.ParseInt(string(b), 10, 64)
		if err != nil || perr != nil || seq < 1 {
			errs = append(errs, orders.FieldError{Field: "cursor", Message: "is not a cursor returned by this export"})
		}
		f.After = seq
	}
	return f, errs
}

// verifyAuditChain answers GET /audit-logs/verify: whether the organisation's stored
// audit chain is intact, or its first broken entry.
func (h *recordHandlers) verifyAuditChain(c *gin.Context) {
	check, err := h.svc.VerifyAuditChain(c.Request.Context(), caller(c))
	if err != nil {
		failed(c, h.log, err)
		return
	}
	c.PureJSON(http.StatusOK, apitypes.AuditChainCheck{Intact: check.Broken == nil, Entries: check.Entries,
		Head: check.Head, FirstBroken: check.Broken})
}

func auditVerificationJSON(v *store.AuditVerification) apitypes.AuditVerification {
	out := apitypes.AuditVerification{ID: v.ID, Status: v.Status, Checked: v.CheckedSeq, Entries: v.Entries,
		Creator: creatorJSON(v.Creator), CreatedAt: timeOf(v.CreatedAt), UpdatedAt: timeOf(v.UpdatedAt), CompletedAt: timeOrNull(v.CompletedAt)}
	if v.HeadSeq > 0 {
		out.Head = &apitypes.AuditChainHead{Seq: v.HeadSeq, Hash: v.HeadHash}
	}
	if v.Broken != "" {
		var b apitypes.AuditChainBreak
		if err := json.Unmarshal([]byte(v.Broken), &b); err != nil {
			b = apitypes.AuditChainBreak{Reason: auditchain.Malformed, Detail: "the stored break is not readable: " + v.Broken}
		}
		out.FirstBroken = &b
	}
	if v.Error != "" {
		out.Error = &v.Error
	}
	return out
}

// startAuditVerification answers POST /audit-logs/verifications: 202 the verification, which
// checks the whole stored chain in the background.
func (h *recordHandlers) startAuditVerification(c *gin.Context) {
	v, err := h.svc.StartAuditVerification(c.Request.Context(), caller(c))
	if err == nil {
		c.Header("Location", apitypes.BasePath+"/audit-logs/verifications/"+v.ID)
	}
	respond(c, h.log, http.StatusAccepted, auditVerificationJSON)(v, err)
}

// auditVerification answers GET /audit-logs/verifications/{id}.
func (h *recordHandlers) auditVerification(c *gin.Context) {
	respond(c, h.log, http.StatusOK, auditVerificationJSON)(h.svc.AuditVerification(c.Request.Context(), caller(c), c.Param("id")))
}
