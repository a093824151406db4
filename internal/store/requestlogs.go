package store

import (
	"context"
	"time"
)

// RequestLog is one API request as /developer/logs shows it.
type RequestLog struct {
	ID            string
	OrgID         string
	App           string
	Method        string
	Path          string
	Status        int
	LatencyMs     float64
	KeyID         string
	CorrelationID string
	At            time.Time
}

func (RequestLog) TableName() string { return "request_logs" }

// AppendRequestLogs stores a batch of request logs.
func (s *Store) AppendRequestLogs(ctx context.Context, rows []RequestLog) error {
	return insertAll(ctx, s, rows, 200)
}

// RequestLogFilter narrows an app's request logs: those of one correlation id, those with
// one status; zero values keep every row.
type RequestLogFilter struct {
	CorrelationID string
	Status        int
}

// ListRequestLogs returns an app's request logs, newest first, before an id (paging).
func (s *Store) ListRequestLogs(ctx context.Context, orgID, app string, f RequestLogFilter, beforeID string, limit int) ([]RequestLog, error) {
	q := s.with(ctx).Where("org_id = ? AND app = ?", orgID, app)
	if f.CorrelationID != "" {
		q = q.Where("correlation_id = ?", f.CorrelationID)
	}
	if f.Status != 0 {
		q = q.Where("status = ?", f.Status)
	}
	return page[RequestLog](q, beforeID, newestFirst, limit)
}
