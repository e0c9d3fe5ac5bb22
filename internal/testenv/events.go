package testenv

import (
	"context"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Events returns the events about regarding (an object of kind) with the
// given reason (any reason when empty), oldest first as listed: raw error
// text lives there, never in conditions, so tests that check an error's text
// read it here. The object is told by its UID as well as its name, when it
// has one: a test run again in the same process (go test -count) makes
// objects of the same names, whose earlier events are still there.
func Events(ctx context.Context, c client.Reader, kind string, regarding client.Object, reason string) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(regarding.GetNamespace())); err != nil {
		return nil, err
	}
	var found []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind != kind || e.Regarding.Name != regarding.GetName() {
			continue
		}
		if uid := regarding.GetUID(); uid != "" && e.Regarding.UID != uid {
			continue
		}
		if reason == "" || e.Reason == reason {
			found = append(found, e)
		}
	}
	return found, nil
}
