package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The chart's geometry, in pixels.
const (
	svgW, svgH                    = 780, 470
	padL, padR, padTop, padBot    = 70, 200, 64, 56
	plotW, plotH                  = svgW - padL - padR, svgH - padTop - padBot
	colSubmit, colConfirm, colDec = "#1f77b4", "#2ca02c", "#d62728"
	dashP50                       = "6 4"
	font                          = `font-family="sans-serif" font-size="11"`
	fontAttrs                     = font + ` fill="#333"`
	legendX                       = padL + plotW + 18
	legendRowPx                   = 18
)

type curve struct {
	name, color string
	p50         bool
	value       func(result) time.Duration
}

var curves = []curve{
	{"submit p99", colSubmit, false, func(r result) time.Duration { return pct(r.submit, .99) }},
	{"submit p50", colSubmit, true, func(r result) time.Duration { return pct(r.submit, .5) }},
	{"confirmed p99", colConfirm, false, func(r result) time.Duration { return pct(r.confirmed, .99) }},
	{"confirmed p50", colConfirm, true, func(r result) time.Duration { return pct(r.confirmed, .5) }},
	{"decision p99", colDec, false, func(r result) time.Duration { return pct(r.decision, .99) }},
	{"decision p50", colDec, true, func(r result) time.Duration { return pct(r.decision, .5) }},
}

// niceStep is 1, 2 or 5 times a power of ten, so that span holds at most n steps.
func niceStep(span float64, n int) float64 {
	raw := span / float64(n)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			return m * pow
		}
	}
	return 10 * pow
}

func durLabel(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%g s", ms/1000)
	}
	return fmt.Sprintf("%g ms", ms)
}

// writeSVG draws the curves by hand: x the offered rate, y the latency on a log scale,
// the targets and the saturation rate as reference lines.
func writeSVG(path, title, subtitle string, results []result, sat float64, reached bool) error {
	xMax := sat
	lo, hi := float64(submitTarget.Milliseconds()), float64(decisionTarget.Milliseconds())
	for _, r := range results {
		xMax = max(xMax, r.offered)
		for _, c := range curves {
			if v := c.value(r); v > 0 {
				ms := float64(v) / 1e6
				lo, hi = min(lo, ms), max(hi, ms)
			}
		}
	}
	xStep := niceStep(xMax*1.05, 8)
	xMax = math.Ceil(xMax*1.05/xStep) * xStep
	decLo, decHi := math.Floor(math.Log10(max(lo, 0.1))), math.Ceil(math.Log10(hi))
	if decHi-decLo < 2 {
		decHi = decLo + 2
	}
	x := func(rate float64) float64 { return padL + rate/xMax*plotW }
	y := func(ms float64) float64 { return padTop + plotH - (math.Log10(ms)-decLo)/(decHi-decLo)*plotH }

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`, svgW, svgH, svgW, svgH)
	p(`<rect width="100%%" height="100%%" fill="white"/>`)
	p(`<text x="%d" y="22" font-family="sans-serif" font-size="14" font-weight="bold" fill="#111">%s</text>`, padL, html.EscapeString(title))
	p(`<text x="%d" y="40" %s>%s</text>`, padL, fontAttrs, html.EscapeString(subtitle))

	// Grid: every decade labelled, 2x and 5x fainter.
	for d := decLo; d <= decHi; d++ {
		v := math.Pow(10, d)
		p(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ccc"/>`, padL, padL+plotW, y(v), y(v))
		p(`<text x="%d" y="%.1f" text-anchor="end" %s>%s</text>`, padL-6, y(v)+4, fontAttrs, durLabel(v))
		for _, m := range []float64{2, 5} {
			if d < decHi {
				p(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>`, padL, padL+plotW, y(m*v), y(m*v))
			}
		}
	}
	for v := 0.0; v <= xMax+1e-9; v += xStep {
		p(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/>`, x(v), x(v), padTop, padTop+plotH)
		p(`<text x="%.1f" y="%d" text-anchor="middle" %s>%g</text>`, x(v), padTop+plotH+16, fontAttrs, v)
	}
	p(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#666"/>`, padL, padTop, plotW, plotH)
	p(`<text x="%.1f" y="%d" text-anchor="middle" %s>offered rate (orders/s)</text>`, float64(padL)+plotW/2, svgH-14, fontAttrs)
	p(`<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle" %s>latency (log scale)</text>`, float64(padTop)+plotH/2, fontAttrs)

	// Reference lines: the two targets, the saturation rate and half of it.
	st, dt := float64(submitTarget.Milliseconds()), float64(decisionTarget.Milliseconds())
	targets := []struct {
		name, color string
		ms          float64
	}{{"target: submit p99 " + durLabel(st), colSubmit, st}, {"target: decision p99 " + durLabel(dt), colDec, dt}}
	for _, t := range targets {
		p(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="2 3"/>`, padL, padL+plotW, y(t.ms), y(t.ms), t.color)
	}
	if sat > 0 {
		p(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#555" stroke-dasharray="6 3"/>`, x(sat), x(sat), padTop, padTop+plotH)
		label := fmt.Sprintf("saturation %.1f/s", sat)
		if !reached {
			label = fmt.Sprintf("not saturated at %.1f/s", sat)
		}
		p(`<text x="%.1f" y="%d" text-anchor="middle" %s>%s</text>`, x(sat), padTop-6, fontAttrs, label)
		p(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999" stroke-dasharray="1 3"/>`, x(sat/2), x(sat/2), padTop, padTop+plotH)
		p(`<text x="%.1f" y="%d" text-anchor="middle" %s>50 %%</text>`, x(sat/2), padTop-6, fontAttrs)
	}

	for i, c := range curves {
		var pts []string
		for _, r := range results {
			if v := c.value(r); v > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.offered), y(float64(v)/1e6)))
			}
		}
		dash := ""
		if c.p50 {
			dash = ` stroke-dasharray="` + dashP50 + `"`
		}
		if len(pts) > 0 {
			p(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`, strings.Join(pts, " "), c.color, dash)
			for _, pt := range pts {
				cx, cy, _ := strings.Cut(pt, ",")
				p(`<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`, cx, cy, c.color)
			}
		}
		ly := padTop + 8 + i*legendRowPx
		p(`<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`, legendX, legendX+26, ly, ly, c.color, dash)
		p(`<text x="%d" y="%d" %s>%s</text>`, legendX+32, ly+4, fontAttrs, html.EscapeString(c.name))
	}
	for i, t := range targets {
		ly := padTop + 8 + (len(curves)+i)*legendRowPx
		p(`<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-dasharray="2 3"/>`, legendX, legendX+26, ly, ly, t.color)
		p(`<text x="%d" y="%d" %s>%s</text>`, legendX+32, ly+4, fontAttrs, html.EscapeString(t.name))
	}
	notes := []string{
		"submit: the call's latency",
		"confirmed: submit sent →",
		"  Order.Confirmed (orders",
		"  without approval)",
		"decision: decide sent →",
		"  Wallet.SigningRequested",
		"server times (occurredAt),",
		"  same machine",
	}
	for i, n := range notes {
		indent := 0
		if rest, ok := strings.CutPrefix(n, "  "); ok {
			n, indent = rest, 10
		}
		p(`<text x="%d" y="%d" %s fill="#666">%s</text>`, legendX+indent, padTop+8+(len(curves)+len(targets)+1)*legendRowPx+i*15, font, html.EscapeString(n))
	}
	p(`</svg>`)

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
