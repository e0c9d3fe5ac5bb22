package reconciler

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// TestEventsAreRateLimitedAndCarryNoLinkCredentials reports the same failure
// of one object many times: one event per interval and reason, a new one
// at once for another class of failure, and never the credentials a link
// in the error quoted.
func TestEventsAreRateLimitedAndCarryNoLinkCredentials(t *testing.T) {
	recorder := events.NewFakeRecorder(100)
	e := NewEvents(recorder)
	now := time.Unix(0, 0)
	e.now = func() time.Time { return now }
	m := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: "u1"}}
	fetchErr := errors.New("fetching https://puller:s3cret@registry.example/v2/x?token=t0k3n: 401")

	for range 10 {
		e.warnOutcome(m, Retry("ContentFailed", "The content cannot be fetched (401)", fetchErr))
	}
	e.warnOutcome(m, Retry("ContentFailed", "The content cannot be rendered", errors.New("bad yaml")))
	now = now.Add(eventInterval)
	e.warnOutcome(m, Retry("ContentFailed", "The content cannot be fetched (401)", fetchErr))

	got := drain(recorder)
	if len(got) != 3 {
		t.Fatalf("got %d events, want 3 (first, another class, after the interval): %q", len(got), got)
	}
	for _, ev := range got {
		if strings.Contains(ev, "s3cret") || strings.Contains(ev, "t0k3n") || strings.Contains(ev, "puller") {
			t.Errorf("event quotes link credentials: %q", ev)
		}
	}
	if !strings.Contains(got[0], "registry.example/v2/x") {
		t.Errorf("event lost the link itself: %q", got[0])
	}
}

func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-r.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}
