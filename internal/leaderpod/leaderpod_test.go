package leaderpod

import (
	"errors"
	"testing"
)

func TestCheckPassesOnceTheLabelSaysTheRole(t *testing.T) {
	refused := errors.New("pods is forbidden")
	for _, tc := range []struct {
		name                      string
		leading, labelled, synced bool
		lastErr                   error
		ready                     bool
	}{
		{name: "starting, the stale label not cleared yet", lastErr: refused},
		{name: "standby, label cleared", synced: true, ready: true},
		{name: "elected, label not written yet", leading: true, synced: true},
		{name: "elected, labelling refused", leading: true, synced: true, lastErr: refused},
		{name: "leader, labelled", leading: true, labelled: true, synced: true, ready: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &Labeller{leading: tc.leading, labelled: tc.labelled, synced: tc.synced, lastErr: tc.lastErr}
			err := l.Check(nil)
			if (err == nil) != tc.ready {
				t.Fatalf("Check() = %v, want ready %v", err, tc.ready)
			}
			if tc.lastErr != nil && !errors.Is(err, tc.lastErr) {
				t.Errorf("Check() = %v, does not say why: %v", err, tc.lastErr)
			}
		})
	}
}
