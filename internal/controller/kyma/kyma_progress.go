package kyma

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/reconciler"
)

// A Kyma whose modules install one after another used to have its status
// written on nearly every reconcile while they did: "3 of 20 modules are not
// ready yet", then 2, then 1 — about four status writes per Kyma on a first
// install, where two say all there is (its modules are on their way; they
// are ready). Each is a write of the whole Kyma in the control plane and
// its mirror in the runtime. So a status that only reports progress is
// written at most once per progress interval; anything else — a new state,
// a module in Error or Warning, a module added or removed, a new
// generation — is written at once, and so is the last step to Ready.

// DefaultProgressInterval is how often, at most, a Kyma's status is written
// to report only that more of its modules became ready.
const DefaultProgressInterval = 10 * time.Second

// progressWrites remembers, per Kyma, when its status last had to be
// written while its modules were still on their way.
type progressWrites struct {
	interval time.Duration
	mu       sync.Mutex
	last     map[types.UID]time.Time
}

func newProgressWrites(interval time.Duration) *progressWrites {
	return &progressWrites{interval: interval, last: map[types.UID]time.Time{}}
}

// hold says whether the status computed for the Kyma may wait: it only
// reports progress over the stored one (progressOnly), and a status was
// written for this Kyma less than the interval ago. A status that is
// written (hold false) starts the interval anew. The Kyma is reconciled
// again at its Processing interval, so a held status is written within
// the progress interval, or sooner when it stops being progress only.
func (p *progressWrites) hold(uid types.UID, stored, computed *v1beta2.KymaStatus, o reconciler.Outcome, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.Kind != reconciler.KindProgressing {
		delete(p.last, uid)
		return false
	}
	if last, ok := p.last[uid]; ok && progressOnly(stored, computed, o) && now.Sub(last) < p.interval {
		return true
	}
	p.last[uid] = now
	return false
}

// forget drops what is remembered of a Kyma that is gone.
func (p *progressWrites) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, uid)
}

// progressOnly says whether the computed status tells nothing new over the
// stored one but that modules progressed: both say the modules are not all
// ready yet (not the first status, which announces that the operator took
// the Kyma on), for the same generation, with the same modules and the
// same runtime module list and removals, none of them in Error or Warning.
func progressOnly(stored, computed *v1beta2.KymaStatus, o reconciler.Outcome) bool {
	if o.Reason != ReasonModulesNotReady || stored.State != v1beta2.StateProcessing {
		return false
	}
	was := meta.FindStatusCondition(stored.Conditions, v1beta2.ConditionReady)
	is := meta.FindStatusCondition(computed.Conditions, v1beta2.ConditionReady)
	if was == nil || is == nil || was.Reason != ReasonModulesNotReady || was.ObservedGeneration != is.ObservedGeneration {
		return false
	}
	if !equality.Semantic.DeepEqual(meta.FindStatusCondition(stored.Conditions, v1beta2.ConditionWatcherReporting),
		meta.FindStatusCondition(computed.Conditions, v1beta2.ConditionWatcherReporting)) {
		return false // a liveness transition is news
	}
	if !equality.Semantic.DeepEqual(stored.RuntimeModules, computed.RuntimeModules) {
		return false
	}
	if !slices.Equal(moduleNames(stored.Modules), moduleNames(computed.Modules)) {
		return false
	}
	if !slices.Equal(removalNames(stored.Modules), removalNames(computed.Modules)) {
		return false // a removal is stored before its Manifest goes (kyma_history.go)
	}
	if !equality.Semantic.DeepEqual(manualUpgrades(stored.Modules), manualUpgrades(computed.Modules)) {
		return false // an offer's time is its deadline's start (kyma_manual.go)
	}
	for _, m := range computed.Modules {
		if m.State == v1beta2.StateError || m.State == v1beta2.StateWarning {
			return false
		}
	}
	return true
}

func moduleNames(modules []v1beta2.ModuleStatus) []string {
	out := make([]string, 0, len(modules))
	for _, m := range modules {
		out = append(out, m.Name)
	}
	return out
}

func removalNames(modules []v1beta2.ModuleStatus) []string {
	var out []string
	for _, m := range modules {
		if m.Removal != nil {
			out = append(out, m.Name)
		}
	}
	return out
}
