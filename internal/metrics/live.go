package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opentreasury/treasury/wshub/closecode"
)

// LiveStats are the counts of a WebSocket hub since it started: its open connections,
// the frames it wrote whole, and its ended connections by close code (1006 for one that
// ended without a close frame: a network error or a missing pong).
type LiveStats struct {
	Connections int
	FramesSent  uint64
	Closes      map[int]uint64
}

// WatchLive reports a hub's counts at every scrape. The hub keeps them itself, off its
// fan-out's path; a process with several hubs (tests) reports their sum.
func (m *Metrics) WatchLive(stats func() LiveStats) {
	if m == nil {
		return
	}
	m.live.mu.Lock()
	m.live.sources = append(m.live.sources, stats)
	m.live.mu.Unlock()
}

// liveCollector reads the hubs' counts when scraped.
type liveCollector struct {
	connections, frames, closes *prometheus.Desc

	mu      sync.Mutex
	sources []func() LiveStats
}

func newLiveCollector() *liveCollector {
	return &liveCollector{
		connections: prometheus.NewDesc("treasury_websocket_connections",
			"Open WebSocket connections of this process.", nil, nil),
		frames: prometheus.NewDesc("treasury_websocket_frames_sent_total",
			"WebSocket frames written whole to clients: events, connection.ready, pongs, pings and close frames.", nil, nil),
		closes: prometheus.NewDesc("treasury_websocket_closes_total",
			"Ended WebSocket connections by close code: the server's (1001 restart, 4001 disabled, 4003 credential, "+
				"4004 deleted, 4008 too slow, 1002/1009 protocol) or the client's echoed; 1006 without a close frame.",
			[]string{"code"}, nil),
	}
}

func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.connections
	ch <- c.frames
	ch <- c.closes
}

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := append([]func() LiveStats(nil), c.sources...)
	c.mu.Unlock()
	var (
		conns  int
		frames uint64
		closes = map[string]uint64{}
	)
	for _, src := range sources {
		s := src()
		conns += s.Connections
		frames += s.FramesSent
		for code, n := range s.Closes {
			closes[closeCodeLabel(code)] += n
		}
	}
	ch <- prometheus.MustNewConstMetric(c.connections, prometheus.GaugeValue, float64(conns))
	ch <- prometheus.MustNewConstMetric(c.frames, prometheus.CounterValue, float64(frames))
	for code, n := range closes {
		ch <- prometheus.MustNewConstMetric(c.closes, prometheus.CounterValue, float64(n), code)
	}
}

// serviceCloseCodes are the application close codes the service sends (SPEC 4).
var serviceCloseCodes = map[int]bool{
	closecode.ConfigDisabled: true, closecode.Credential: true, closecode.ConfigDeleted: true, closecode.TooSlow: true,
}

// closeCodeLabel keeps the protocol's codes (1000 – 1015) and the service's own; a code a
// client chose from the application ranges is "other", so clients cannot add series.
func closeCodeLabel(code int) string {
	if (code >= 1000 && code <= 1015) || serviceCloseCodes[code] {
		return strconv.Itoa(code)
	}
	return "other"
}
