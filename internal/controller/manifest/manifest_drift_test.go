package manifest

import (
	"testing"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
)

func TestListingTTLFor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ready time.Duration
		want  time.Duration
	}{
		{name: "production interval keeps the TTL", ready: 5 * time.Minute, want: listingTTL},
		{name: "interval of twice the TTL keeps it", ready: 2 * listingTTL, want: listingTTL},
		{name: "shorter interval halves it", ready: 2 * time.Second, want: time.Second},
		{name: "no periodic check keeps the TTL", ready: 0, want: listingTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := listingTTLFor(requeue.Intervals{Ready: tc.ready}); got != tc.want {
				t.Errorf("listingTTLFor(Ready %s) = %s, want %s", tc.ready, got, tc.want)
			}
		})
	}
}
