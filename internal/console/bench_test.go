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

// BenchmarkFleetPage renders the fleet page (counts, matrix, a filtered
// page of runtimes) of 10,000 runtimes × 20 modules from the cache's
// Kymas: the server time of one view. docs/console.md quotes it.
func BenchmarkFleetPage(b *testing.B) {
	kymas := benchFleet(10_000, 20)
	pages, err := parsePages()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	var buf bytes.Buffer
	for _, f := range []Filter{{}, {State: "Error"}, {Label: "region=r3", Text: "runtime-0"}} {
		b.Run(fmt.Sprintf("filter=%+v", f), func(b *testing.B) {
			for b.Loop() {
				fl, err := fleetOf(kymas, f, 2, now)
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				if err := pages["fleet"].ExecuteTemplate(&buf, "layout", view{Page: "fleet", States: states, Data: fleetData{Fleet: fl, Filter: f}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
			b.ReportMetric(float64(buf.Len()), "bytes/page")
		})
	}
}

// BenchmarkChangeFanOut is the cost of one runtime's change with 1,000
// pages open: the hub's work per viewer, which must not grow with the
// fleet.
func BenchmarkChangeFanOut(b *testing.B) {
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

// BenchmarkViewerMemory is what an open page costs the console beyond the
// cache: its subscription with a full set of pending changes.
func BenchmarkViewerMemory(b *testing.B) {
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
