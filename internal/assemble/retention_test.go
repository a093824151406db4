package assemble

import (
	"testing"
	"time"

	"github.com/opentreasury/treasury/activities"
)

// A Config made in code (the dev bundle's) that sets no retention gets the documented
// defaults rather than deleting everything at once; one that sets it keeps its own.
func TestAConfigWithoutRetentionGetsTheDefaults(t *testing.T) {
	defaults, err := ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := (Config{}).retention(); got != defaults.Retention || got.Batch == 0 {
		t.Fatalf("retention of a Config without one: %+v, want the defaults %+v", got, defaults.Retention)
	}
	own := activities.Retention{Events: time.Hour, Webhooks: activities.Forever, Batch: 5}
	if got := (Config{Retention: own}).retention(); got != own {
		t.Fatalf("a Config's own retention became %+v", got)
	}
}
