package assemble

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/opentreasury/treasury/internal/metrics"
)

// MetricsServer serves a process's /metrics on an address of its own, apart from the
// public API: what it tells (request and event volumes of every organisation at once) is
// for the operators' network, not for integrators, and the worker has no other server.
type MetricsServer struct {
	// URL is the server's base, http://host:port.
	URL  string
	srv  *http.Server
	done chan error
}

// ServeMetrics listens on addr and serves m at /metrics until Stop; any other path is 404.
func ServeMetrics(addr string, m *metrics.Metrics, log *slog.Logger) (*MetricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+metrics.Path, m.Handler())
	s := &MetricsServer{URL: "http://" + ln.Addr().String(), done: make(chan error, 1),
		// A scrape is gathered within the handler's own 10 s timeout.
		srv: newServer(addr, mux, limits{readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second,
			idle: 2 * time.Minute, maxHeader: 16 << 10})}
	go func() { s.done <- s.srv.Serve(ln) }()
	log.Info("metrics listening", "addr", ln.Addr().String(), "path", metrics.Path)
	return s, nil
}

// Stop closes the server: a scrape in flight is cut off, which Prometheus takes as one
// missed scrape of a process that is going away anyway.
func (s *MetricsServer) Stop() error {
	if s == nil {
		return nil
	}
	err := s.srv.Close()
	if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// WithMetrics serves m at /metrics (GET) beside h, for the dev bundle, whose one local
// address serves everything; every other request goes to h unchanged.
func WithMetrics(h http.Handler, m *metrics.Metrics) http.Handler {
	metricsHandler := m.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == metrics.Path && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			metricsHandler.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}
