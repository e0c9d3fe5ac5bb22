package console

import (
	"slices"
	"sync"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// model is the fleet as the fleet page shows it, kept up to date from the
// Kyma informer's events, so that a view does not summarise every Kyma
// again: an event summarises one Kyma and moves its counts (O(modules)),
// and a view filters the kept rows in name order and renders one page.
// It holds rows, not Kymas; their strings and labels are the cache's own,
// so its memory beyond the cache is the rows' headers and module cells
// (BenchmarkFleetModelMemory).
type model struct {
	mu   sync.RWMutex
	rows map[string]*Row
	// names are the rows' names in order, so that a page needs no sort; an
	// added or removed runtime moves the names after it (a copy, no
	// allocation per event), a changed one nothing.
	names []string
	// counts are the runtimes by state, matrix the runtimes by module and
	// module state: what every fleet page shows, kept as events come.
	counts map[v1beta2.State]int
	matrix map[string]map[v1beta2.State]int
}

func newModel() *model {
	return &model{rows: map[string]*Row{}, counts: map[v1beta2.State]int{}, matrix: map[string]map[v1beta2.State]int{}}
}

// put keeps the Kyma's summary in place of its last one.
func (m *model) put(k *v1beta2.Kyma) {
	r := summarize(k)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.rows[r.Name]; ok {
		m.count(old, -1)
	} else if i, found := slices.BinarySearch(m.names, r.Name); !found {
		m.names = slices.Insert(m.names, i, r.Name)
	}
	m.rows[r.Name] = &r
	m.count(&r, 1)
}

// remove forgets a deleted Kyma.
func (m *model) remove(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.rows[name]
	if !ok {
		return
	}
	m.count(old, -1)
	delete(m.rows, name)
	if i, found := slices.BinarySearch(m.names, name); found {
		m.names = slices.Delete(m.names, i, i+1)
	}
}

// count adds a row to the counts and the matrix (delta 1) or takes it
// out (delta -1); a module no runtime has any more leaves the matrix.
func (m *model) count(r *Row, delta int) {
	m.counts[r.State] += delta
	for _, c := range r.Modules {
		byState := m.matrix[c.Name]
		if byState == nil {
			byState = map[v1beta2.State]int{}
			m.matrix[c.Name] = byState
		}
		byState[c.State] += delta
		if byState[c.State] == 0 {
			delete(byState, c.State)
		}
		if len(byState) == 0 {
			delete(m.matrix, c.Name)
		}
	}
}

// row is one runtime's row at now.
func (m *model) row(name string, now time.Time) (Row, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.rows[name]
	if !ok {
		return Row{}, false
	}
	return r.at(now), true
}

// fleet is the fleet page at now: the counts and the matrix as kept, and
// the page of the rows the filter selects, in name order.
func (m *model) fleet(f Filter, page int, now time.Time) (Fleet, error) {
	match, err := f.compile()
	if err != nil {
		return Fleet{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var matched []*Row
	for _, name := range m.names {
		if r := m.rows[name]; match.matches(r) {
			matched = append(matched, r)
		}
	}
	fl := Fleet{Total: len(m.rows), Matched: len(matched), Pages: max(1, (len(matched)+PageSize-1)/PageSize)}
	fl.Page = min(max(page, 1), fl.Pages)
	start := (fl.Page - 1) * PageSize
	for _, r := range matched[start:min(start+PageSize, len(matched))] {
		fl.Rows = append(fl.Rows, r.at(now))
	}
	for _, s := range states {
		fl.Counts = append(fl.Counts, Count{State: s, N: m.counts[s]})
	}
	modules := make([]string, 0, len(m.matrix))
	for name := range m.matrix {
		modules = append(modules, name)
	}
	slices.Sort(modules)
	for _, name := range modules {
		mr := MatrixRow{Module: name}
		for _, s := range states {
			mr.Counts = append(mr.Counts, Count{State: s, N: m.matrix[name][s]})
		}
		fl.Matrix = append(fl.Matrix, mr)
	}
	return fl, nil
}
