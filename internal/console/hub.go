package console

import (
	"sync"
)

// maxPending bounds the runtimes a viewer is told about one by one; past
// it the viewer is told to refresh everything it shows, which costs it
// one request instead of the console a growing set.
const maxPending = 256

// hub fans changes out to the open pages. A change costs each viewer O(1):
// the runtime's name goes into the viewer's pending set and the viewer is
// woken; its own goroutine sends the names (server-sent events), and the
// page fetches the fragments it shows. A slow viewer holds nothing up.
type hub struct {
	mu      sync.Mutex
	viewers map[*viewer]struct{}
}

type viewer struct {
	wake chan struct{}
	mu   sync.Mutex
	// runtimes changed since the last send; overflow means "more than
	// maxPending: refresh all".
	runtimes map[string]struct{}
	overflow bool
	// fleet: something changed that the fleet's counts, the rollouts or
	// the backups may show.
	fleet bool
}

func newHub() *hub { return &hub{viewers: map[*viewer]struct{}{}} }

func (h *hub) subscribe() *viewer {
	v := &viewer{wake: make(chan struct{}, 1), runtimes: map[string]struct{}{}}
	h.mu.Lock()
	h.viewers[v] = struct{}{}
	h.mu.Unlock()
	return v
}

func (h *hub) unsubscribe(v *viewer) {
	h.mu.Lock()
	delete(h.viewers, v)
	h.mu.Unlock()
}

// changed tells every viewer that runtime (empty for none in particular)
// and the fleet changed.
func (h *hub) changed(runtime string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for v := range h.viewers {
		v.note(runtime)
	}
}

func (v *viewer) note(runtime string) {
	v.mu.Lock()
	v.fleet = true
	if runtime != "" && !v.overflow {
		if len(v.runtimes) >= maxPending {
			v.overflow, v.runtimes = true, map[string]struct{}{}
		} else {
			v.runtimes[runtime] = struct{}{}
		}
	}
	v.mu.Unlock()
	select {
	case v.wake <- struct{}{}:
	default: // already woken
	}
}

// take empties the viewer's pending changes.
func (v *viewer) take() (runtimes []string, all, fleet bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for r := range v.runtimes {
		runtimes = append(runtimes, r)
	}
	all, fleet = v.overflow, v.fleet
	v.runtimes, v.overflow, v.fleet = map[string]struct{}{}, false, false
	return runtimes, all, fleet
}
