package console

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Display states beyond the API's: a runtime the operator cannot reach or
// whose watcher agent went silent is Unknown, whatever its last status
// says, and one the operator has not reported yet is Pending.
const (
	StateUnknown v1beta2.State = "Unknown"
	StatePending v1beta2.State = "Pending"
)

// states are the display states in the order the console shows them.
var states = []v1beta2.State{v1beta2.StateReady, v1beta2.StateProcessing, v1beta2.StateWarning, v1beta2.StateError, v1beta2.StateDeleting, StateUnknown, StatePending}

// Reasons the console reads from the Kyma controller's conditions (its
// constants live in internal/controller/kyma, which the console does not
// import: it reads the API, as any client does).
const (
	conditionPaused          = "Paused"
	reasonRuntimeUnavailable = "RuntimeUnavailable"
	reasonHibernated         = "Hibernated"
)

// Row is one runtime as the fleet page lists it.
type Row struct {
	Name      string
	RuntimeID string
	// State is what the console shows: the Kyma's state, or Unknown when
	// its liveness is in doubt (Stale says why and since when).
	State v1beta2.State
	// Stale explains an Unknown state, with its age at the time of the
	// view (at); staleWhy and staleSince are what the model keeps.
	Stale      string
	staleWhy   string
	staleSince time.Time
	Message    string
	Channel    string
	Paused     string
	Hibernated bool
	// Window: a module waits for the runtime's maintenance window.
	Window       bool
	ModulesReady int
	ModulesTotal int
	Modules      []ModuleCell
	Labels       map[string]string
	Shard        string
}

// ModuleCell is one module of one runtime.
type ModuleCell struct {
	Name, Version, Channel, Message string
	State                           v1beta2.State
}

// rowOf summarises a Kyma at now.
func rowOf(k *v1beta2.Kyma, now time.Time) Row { return summarize(k).at(now) }

// at is the row as shown at now: an Unknown state says for how long.
func (r Row) at(now time.Time) Row {
	if r.staleWhy != "" {
		r.Stale = r.staleWhy + age(now, r.staleSince)
	}
	return r
}

// summarize is a Kyma's row without the ages, which change with the time
// of the view and not with the Kyma: what the model keeps.
func summarize(k *v1beta2.Kyma) Row {
	r := Row{
		Name: k.Name, RuntimeID: k.Labels[v1beta2.RuntimeIDLabel], State: k.Status.State, Channel: k.Spec.Channel,
		Labels: k.Labels, Shard: k.Labels[v1beta2.ShardBucketLabel],
	}
	if r.State == "" {
		r.State = StatePending
	}
	if c := meta.FindStatusCondition(k.Status.Conditions, v1beta2.ConditionReady); c != nil && c.Status != "True" {
		r.Message = c.Message
		if c.Reason == reasonRuntimeUnavailable {
			r.State, r.staleWhy, r.staleSince = StateUnknown, "the runtime cannot be reached, for ", c.LastTransitionTime.Time
		}
	}
	if c := meta.FindStatusCondition(k.Status.Conditions, v1beta2.ConditionWatcherReporting); c != nil && c.Status == "False" && r.State != StateUnknown {
		r.State, r.staleWhy, r.staleSince = StateUnknown, "no report from the runtime's watcher for ", c.LastTransitionTime.Time
	}
	if c := meta.FindStatusCondition(k.Status.Conditions, conditionPaused); c != nil && c.Status == "True" {
		r.Paused, r.Hibernated = c.Message, c.Reason == reasonHibernated
	}
	seen := map[string]bool{}
	r.Modules = make([]ModuleCell, 0, len(k.Status.Modules))
	for _, m := range k.Status.Modules {
		seen[m.Name] = true
		r.Modules = append(r.Modules, ModuleCell{Name: m.Name, Version: m.Version, Channel: m.Channel, Message: m.Message, State: m.State})
		if m.State == v1beta2.StateReady {
			r.ModulesReady++
		}
		r.Window = r.Window || m.Maintenance
	}
	for _, m := range k.Spec.Modules {
		if !seen[m.Name] {
			r.Modules = append(r.Modules, ModuleCell{Name: m.Name, Channel: m.Channel, State: StatePending})
		}
	}
	r.ModulesTotal = len(r.Modules)
	slices.SortFunc(r.Modules, func(a, b ModuleCell) int { return cmp.Compare(a.Name, b.Name) })
	return r
}

// livenessOf says, for the runtime page, what the console knows of the
// runtime being alive: whether the operator reaches it, and what its
// watcher agent's condition says (written on transitions only, so its
// time is when the agent began or stopped reporting).
func livenessOf(k *v1beta2.Kyma, now time.Time) string {
	if c := meta.FindStatusCondition(k.Status.Conditions, v1beta2.ConditionReady); c != nil && c.Status != "True" && c.Reason == reasonRuntimeUnavailable {
		return "Unknown: the operator cannot reach the runtime's API server, for " + age(now, c.LastTransitionTime.Time) + "."
	}
	c := meta.FindStatusCondition(k.Status.Conditions, v1beta2.ConditionWatcherReporting)
	switch {
	case c == nil:
		return "No watcher agent reports from this runtime; what it shows comes from the operator's own periodic checks."
	case c.Status == "True":
		return "Heard: the runtime's watcher agent has been reporting for " + age(now, c.LastTransitionTime.Time) + "."
	default:
		return "Unknown: no report from the runtime's watcher agent for " + age(now, c.LastTransitionTime.Time) + "."
	}
}

// age says how long ago t was, to the second.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return now.Sub(t).Truncate(time.Second).String()
}

// Filter selects runtimes; a zero field selects all.
type Filter struct {
	State   string
	Module  string
	Version string
	// Label is a label selector (key=value, key!=value, key in (a,b), …).
	Label  string
	Shard  string
	Paused string // "paused", "hibernated", "no"
	Window bool
	Text   string
}

// matcher is a Filter ready to match; its label selector parsed once.
type matcher struct {
	f        Filter
	selector labels.Selector
	text     string
}

func (f Filter) compile() (matcher, error) {
	m := matcher{f: f, selector: labels.Everything(), text: strings.ToLower(strings.TrimSpace(f.Text))}
	if strings.TrimSpace(f.Label) != "" {
		s, err := labels.Parse(f.Label)
		if err != nil {
			return m, err
		}
		m.selector = s
	}
	return m, nil
}

func (m matcher) matches(r *Row) bool {
	f := m.f
	switch {
	case f.State != "" && string(r.State) != f.State,
		f.Shard != "" && r.Shard != f.Shard,
		f.Window && !r.Window,
		f.Paused == "paused" && r.Paused == "",
		f.Paused == "hibernated" && !r.Hibernated,
		f.Paused == "no" && r.Paused != "",
		!m.selector.Matches(labels.Set(r.Labels)),
		m.text != "" && !strings.Contains(strings.ToLower(r.Name+" "+r.RuntimeID+" "+r.Message), m.text):
		return false
	}
	if f.Module == "" && f.Version == "" {
		return true
	}
	for _, c := range r.Modules {
		if (f.Module == "" || c.Name == f.Module) && (f.Version == "" || c.Version == f.Version) {
			return true
		}
	}
	return false
}

// Fleet is the fleet page's content: counts of every runtime by state, the
// module × state matrix, and one page of the runtimes the filter selects.
type Fleet struct {
	Total  int
	Counts []Count
	// Matrix has a row per module: how many runtimes have it in each state.
	Matrix  []MatrixRow
	Rows    []Row
	Matched int
	Page    int
	Pages   int
}

// Count is how many runtimes are in a state.
type Count struct {
	State v1beta2.State
	N     int
}

// MatrixRow is one module's runtimes by state, in the order of states.
type MatrixRow struct {
	Module string
	Counts []Count
}

// PageSize is how many runtimes one fleet page lists.
const PageSize = 50
