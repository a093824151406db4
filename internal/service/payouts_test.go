package service

import (
	"strings"
	"testing"
	"time"
)

func TestISODurationsOfFixedLength(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT2S": 2 * time.Second, "PT1M": time.Minute, "PT12H": 12 * time.Hour, "P1D": 24 * time.Hour,
		"P1W": 7 * 24 * time.Hour, "P1DT6H30M": 30*time.Hour + 30*time.Minute, "P2WT1S": 14*24*time.Hour + time.Second,
	} {
		got, err := ParseISODuration(in)
		if err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
	for in, says := range map[string]string{
		"P1M": "years and months", "P1Y": "years and months", "P1Y2M": "years and months",
		"PT0S": "longer than zero", "P": "longer than zero", "PT": "longer than zero", "1D": "ISO 8601", "PT1.5S": "ISO 8601",
		"P-1D": "ISO 8601", "pt1m": "ISO 8601", "P999999999999W": "too long",
	} {
		if _, err := ParseISODuration(in); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want an error saying %q", in, err, says)
		}
	}
	for d, want := range map[time.Duration]string{
		time.Second: "PT1S", time.Minute: "PT1M", 90 * time.Minute: "PT1H30M", 26 * time.Hour: "P1DT2H", 48 * time.Hour: "P2D",
	} {
		if got := FormatISODuration(d); got != want {
			t.Errorf("%s: %s, want %s", d, got, want)
		}
		if back, err := ParseISODuration(FormatISODuration(d)); err != nil || back != d {
			t.Errorf("%s does not read back: %s %v", FormatISODuration(d), back, err)
		}
	}
}
