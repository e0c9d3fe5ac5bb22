package metrics

import "sync"

// kymaSeries remembers the state series SetKymaStates set for each Kyma, so
// that a Kyma's stale series are deleted by their full labels. Deleting by a
// partial match instead walks every series of the fleet, once per Kyma
// reconcile.
var kymaSeries = struct {
	sync.Mutex
	byKyma map[string]stateSeries
}{byKyma: map[string]stateSeries{}}

// stateSeries is one Kyma's state and its modules' states (module → state).
type stateSeries struct {
	state   string
	modules map[string]string
}

// SetKymaStates sets the KymaState and ModuleState series of a Kyma to its
// state and its modules' (module name → state), and deletes those it set
// before that no longer hold. Only the Kyma's own series are touched.
func SetKymaStates(kyma, state string, modules map[string]string) {
	kymaSeries.Lock()
	defer kymaSeries.Unlock()
	old, known := kymaSeries.byKyma[kyma]
	if known && old.state != state {
		KymaState.DeleteLabelValues(kyma, old.state)
	}
	for module, was := range old.modules {
		if now, ok := modules[module]; !ok || now != was {
			ModuleState.DeleteLabelValues(kyma, module, was)
		}
	}
	KymaState.WithLabelValues(kyma, state).Set(1)
	for module, now := range modules {
		ModuleState.WithLabelValues(kyma, module, now).Set(1)
	}
	kymaSeries.byKyma[kyma] = stateSeries{state: state, modules: modules}
}

// ForgetKyma deletes the series SetKymaStates set for a Kyma that is gone.
func ForgetKyma(kyma string) {
	kymaSeries.Lock()
	defer kymaSeries.Unlock()
	old, known := kymaSeries.byKyma[kyma]
	if !known {
		return
	}
	KymaState.DeleteLabelValues(kyma, old.state)
	for module, was := range old.modules {
		ModuleState.DeleteLabelValues(kyma, module, was)
	}
	delete(kymaSeries.byKyma, kyma)
}
