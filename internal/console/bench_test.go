package console

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// benchFleet is n runtimes with m modules each, as the cache holds them.
func benchFleet(n, m int) []*v1beta2.Kyma {
	kymas := make([]*v1beta2.Kyma, n)
	for i := range kymas {
		k := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("runtime-%05d", i), Labels: map[string]string{"region": fmt.Sprintf("r%d", i%7)}}}
		k.Status.State = v1beta2.StateReady
		k.Status.Conditions = []metav1.Condition{{Type: v1beta2.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"}}
		for j := range m {
			state := v1beta2.StateReady
			if (i+j)%97 == 0 {
				state = v1beta2.StateError
			}
			k.Status.Modules = append(k.Status.Modules, v1beta2.ModuleStatus{Name: fmt.Sprintf("module-%02d", j), Version: "1.2.3", Channel: "regular", State: state, Message: "all good"})
		}
		kymas[i] = k
	}
	return kymas
}

// benchModel is the model of n runtimes with m modules each.
func benchModel(n, m int) (*model, []*v1beta2.Kyma) {
	kymas := benchFleet(n, m)
	mod := newModel()
	for _, k := range kymas {
		mod.put(k)
	}
	return mod, kymas
}

// BenchmarkFleetPage renders the fleet page (counts, matrix, a filtered
// page of runtimes) of 10,000 runtimes × 20 modules from the model: the
// server time of one view. docs/console.md and docs/performance.md quote
// it.
func BenchmarkFleetPage(b *testing.B) {
	mod, _ := benchModel(10_000, 20)
	pages, err := parsePages()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	var buf bytes.Buffer
	for _, c := range []struct {
		name   string
		filter Filter
	}{{"all", Filter{}}, {"state=Error", Filter{State: "Error"}}, {"label+text", Filter{Label: "region=r3", Text: "runtime-0"}}} {
		f := c.filter
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				fl, err := mod.fleet(f, 2, now)
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				if err := pages["fleet"].ExecuteTemplate(&buf, "layout", view{Page: "fleet", States: states, Data: fleetData{Fleet: fl, Filter: f}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N), "ms/page")
			b.ReportMetric(float64(buf.Len()), "bytes/page")
		})
	}
}

// BenchmarkFleetModelChange is the model's work for one runtime's change
// in a fleet of 10,000 × 20: the Kyma summarised again and its counts
// moved, whatever the fleet's size.
func BenchmarkFleetModelChange(b *testing.B) {
	mod, kymas := benchModel(10_000, 20)
	i := 0
	for b.Loop() {
		k := kymas[i%len(kymas)]
		// Flip one module's state, so that the counts really move.
		if k.Status.Modules[0].State == v1beta2.StateReady {
			k.Status.Modules[0].State = v1beta2.StateWarning
		} else {
			k.Status.Modules[0].State = v1beta2.StateReady
		}
		mod.put(k)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/change")
}

// BenchmarkFleetModelMemory is the model's memory beyond the cache for
// 10,000 runtimes × 20 modules: the rows, their module cells, the names
// and the counts (the strings are the cache's).
func BenchmarkFleetModelMemory(b *testing.B) {
	kymas := benchFleet(10_000, 20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mod := newModel()
	for _, k := range kymas {
		mod.put(k)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(mod)
	runtime.KeepAlive(kymas)
	for b.Loop() {
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(kymas)), "bytes/runtime")
}

// BenchmarkFleetChangeFanOut is the cost of one runtime's change with
// 1,000 pages open: the hub's work per viewer, which must not grow with
// the fleet.
func BenchmarkFleetChangeFanOut(b *testing.B) {
	h := newHub()
	viewers := make([]*viewer, 1000)
	for i := range viewers {
		viewers[i] = h.subscribe()
	}
	i := 0
	for b.Loop() {
		h.changed(fmt.Sprintf("runtime-%05d", i%10_000))
		i++
		if i%maxPending == 0 {
			for _, v := range viewers {
				v.take()
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(viewers)), "ns/viewer")
}

// BenchmarkFleetViewerMemory is what an open page costs the console beyond the
// cache: its subscription with a full set of pending changes.
func BenchmarkFleetViewerMemory(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := newHub()
	const n = 1000
	for range n {
		v := h.subscribe()
		for j := range maxPending {
			v.note(fmt.Sprintf("runtime-%05d", j))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(h)
	for b.Loop() {
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/viewer")
}
