package fleetbench

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// kymaStates follows one Kyma's status.state through a watch, with the time
// each state was seen, so that the moment the Kyma shows Ready is taken
// when the API server tells, not when a poll happens to look.
type kymaStates struct {
	mu      sync.Mutex
	state   v1beta2.State
	seen    time.Time
	changed chan struct{}
}

// observe records a state seen now and wakes the waiters.
func (s *kymaStates) observe(state v1beta2.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state == s.state {
		return
	}
	s.state, s.seen = state, time.Now()
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *kymaStates) current() v1beta2.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// readyAfter waits until the Kyma shows Ready at or after t and returns
// when that was seen.
func (s *kymaStates) readyAfter(ctx context.Context, t time.Time) (time.Time, error) {
	for {
		s.mu.Lock()
		state, seen, changed := s.state, s.seen, s.changed
		s.mu.Unlock()
		if state == v1beta2.StateReady && !seen.Before(t) {
			return seen, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return time.Time{}, context.Cause(ctx)
		}
	}
}

// firstStatus waits until the Kyma has a status and returns when that was
// seen.
func (s *kymaStates) firstStatus(ctx context.Context) (time.Time, error) {
	for {
		s.mu.Lock()
		state, seen, changed := s.state, s.seen, s.changed
		s.mu.Unlock()
		if state != "" {
			return seen, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return time.Time{}, context.Cause(ctx)
		}
	}
}

// watchKyma follows the reaction Kyma until ctx ends, watching again when a
// watch ends.
func (r *reaction) watchKyma(ctx context.Context) *kymaStates {
	s := &kymaStates{changed: make(chan struct{})}
	return s.follow(ctx, r.client, namespace, reactionKyma)
}

// follow runs the watch in the background and returns s.
func (s *kymaStates) follow(ctx context.Context, c client.WithWatch, ns, name string) *kymaStates {
	go func() {
		for ctx.Err() == nil {
			if err := s.watchOnce(ctx, c, ns, name); err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond) // the API server is busy: watch again shortly
			}
		}
	}()
	return s
}

func (s *kymaStates) watchOnce(ctx context.Context, c client.WithWatch, ns, name string) error {
	w, err := c.Watch(ctx, &v1beta2.KymaList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if ev.Type == watch.Error {
				return errors.New("the Kyma watch failed")
			}
			if k, ok := ev.Object.(*v1beta2.Kyma); ok {
				s.observe(k.Status.State)
			}
		}
	}
}
