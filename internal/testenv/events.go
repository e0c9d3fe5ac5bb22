package testenv

import (
	"context"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Events returns the events in namespace about the object of kind and name
// with the given reason (any reason when empty), oldest first as listed:
// raw error text lives there, never in conditions, so tests that check an
// error's text read it here.
func Events(ctx context.Context, c client.Reader, namespace, kind, name, reason string) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var found []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name && (reason == "" || e.Reason == reason) {
			found = append(found, e)
		}
	}
	return found, nil
}
