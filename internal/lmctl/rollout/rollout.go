// Package rollout is lmctl's view of ModuleRollouts: the rollouts of a
// control plane at a glance, one rollout in detail, and pausing, resuming
// and rolling back one (lmctl rollout status|pause|resume|rollback).
package rollout

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
)

// Rollout is one rollout as lmctl shows it: stable field names for scripts
// (-o json|yaml).
type Rollout struct {
	Name        string     `json:"name"`
	Module      string     `json:"module"`
	Channel     string     `json:"channel"`
	Phase       string     `json:"phase"`
	Paused      bool       `json:"paused"`
	From        string     `json:"from,omitempty"`
	To          string     `json:"to,omitempty"`
	Template    string     `json:"template,omitempty"`
	Wave        int32      `json:"wave"`
	Done        int32      `json:"done"`
	Total       int32      `json:"total"`
	Pending     int32      `json:"pending"`
	InFlight    []string   `json:"inFlight,omitempty"`
	Failed      []string   `json:"failed,omitempty"`
	FailedCount int32      `json:"failedCount"`
	HaltReason  string     `json:"haltReason,omitempty"`
	ResumedBy   string     `json:"resumedBy,omitempty"`
	ResumedAt   *time.Time `json:"resumedAt,omitempty"`
	Message     string     `json:"message,omitempty"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	// Runtimes names the runtimes by state, at most 20 of each (the counts
	// above have them all), with why each failed or waits.
	Runtimes Runtimes `json:"runtimes"`
	// WaveStartedAt is when the current wave started, WaveReadyAt when all
	// of it was Ready (its soak began), Soak the policy's soak time.
	WaveStartedAt *time.Time `json:"waveStartedAt,omitempty"`
	WaveReadyAt   *time.Time `json:"waveReadyAt,omitempty"`
	Soak          string     `json:"soak,omitempty"`
	// Rollback is the last rollback asked for (spec.rollback) and what
	// became of it.
	Rollback *RollbackStatus `json:"rollback,omitempty"`
	// Content are toVersion's content links, pinned by digest for the
	// whole rollout.
	Content []Content `json:"content,omitempty"`
	// Created is when the rollout was created; PlannedAt when the planner
	// last looked at it (nil: never).
	Created   time.Time  `json:"created"`
	PlannedAt *time.Time `json:"plannedAt,omitempty"`
	// Conditions are the rollout's conditions, as kstatus reads them.
	Conditions []Condition `json:"conditions,omitempty"`
}

// Runtimes are a rollout's runtimes by state.
type Runtimes struct {
	Done    []string  `json:"done,omitempty"`
	Failed  []Runtime `json:"failed,omitempty"`
	Pending []Runtime `json:"pending,omitempty"`
}

// Runtime is a runtime and why it stands where it does.
type Runtime struct {
	Kyma   string `json:"kyma"`
	Reason string `json:"reason,omitempty"`
}

// RollbackStatus is a rollback acted on: who asked and why, when, the
// version rolled back from, and why it was refused (empty: it was not).
type RollbackStatus struct {
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Of      string    `json:"of,omitempty"`
	Refused string    `json:"refused,omitempty"`
}

// Content is one pinned content link.
type Content struct {
	Name string `json:"name"`
	Link string `json:"link"`
}

// Condition is one condition of a rollout.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// PlannerStaleAfter is how old a moving rollout's plan may be before lmctl
// says no planner looks at it: when the Kymas say so too (the planner
// looks at least every 30 s while a rollout moves).
const PlannerStaleAfter = kyma.DefaultRolloutPlannerTimeout

// List reads every rollout in the namespace, by name.
func List(ctx context.Context, c client.Reader, namespace string) ([]Rollout, error) {
	list := &v1beta2.ModuleRolloutList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing ModuleRollouts in %s: %w", namespace, err)
	}
	out := make([]Rollout, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, of(&list.Items[i]))
	}
	slices.SortFunc(out, func(a, b Rollout) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Get reads one rollout.
func Get(ctx context.Context, c client.Reader, namespace, name string) (Rollout, error) {
	ro := &v1beta2.ModuleRollout{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ro); err != nil {
		return Rollout{}, fmt.Errorf("reading ModuleRollout %s/%s: %w", namespace, name, err)
	}
	return of(ro), nil
}

// SetPaused pauses or resumes a rollout: a merge patch of spec.paused
// alone, which touches nothing else an SRE may be editing.
func SetPaused(ctx context.Context, c client.Client, namespace, name string, paused bool) error {
	return patchSpec(ctx, c, namespace, name, map[string]any{"paused": paused})
}

// Resume lets a paused rollout go on and lifts a halt: spec.paused false
// and spec.resume set to by, who resumes and when (a halt lifts only for a
// value the rollout has not acted on before).
func Resume(ctx context.Context, c client.Client, namespace, name, by string) error {
	return patchSpec(ctx, c, namespace, name, map[string]any{"paused": false, "resume": by})
}

// Rollback asks for a rollback of the rollout: spec.rollback set to by,
// who asks, when and why (acted on only for a value the rollout has not
// acted on before). It returns the rollout as patched.
func Rollback(ctx context.Context, c client.Client, namespace, name, by string) (*v1beta2.ModuleRollout, error) {
	ro := &v1beta2.ModuleRollout{}
	ro.SetNamespace(namespace)
	ro.SetName(name)
	if err := patch(ctx, c, ro, map[string]any{"rollback": by}); err != nil {
		return nil, err
	}
	return ro, nil
}

func patchSpec(ctx context.Context, c client.Client, namespace, name string, spec map[string]any) error {
	ro := &v1beta2.ModuleRollout{}
	ro.SetNamespace(namespace)
	ro.SetName(name)
	return patch(ctx, c, ro, spec)
}

// patch merges spec into the rollout's spec, and reads the result into ro.
func patch(ctx context.Context, c client.Client, ro *v1beta2.ModuleRollout, spec map[string]any) error {
	body, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, ro, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("patching the spec of ModuleRollout %s/%s: %w", ro.Namespace, ro.Name, err)
	}
	return nil
}

func of(ro *v1beta2.ModuleRollout) Rollout {
	s := ro.Status
	r := Rollout{
		Name: ro.Name, Module: ro.Spec.ModuleName, Channel: ro.Spec.Channel, Phase: string(s.Phase), Paused: ro.Spec.Paused,
		From: s.FromVersion, To: s.ToVersion, Template: s.Template, Wave: s.Wave, Done: s.Done, Total: s.Total, Pending: s.Pending,
		InFlight: s.InFlight, Failed: s.Failed, FailedCount: s.FailedCount, HaltReason: s.HaltReason,
		ResumedBy: s.ResumedBy, ResumedAt: timeOf(s.ResumedAt), StartedAt: timeOf(s.StartedAt), CompletedAt: timeOf(s.CompletedAt),
		WaveStartedAt: timeOf(s.WaveStartedAt), PlannedAt: timeOf(s.PlannedAt), Created: ro.CreationTimestamp.Time,
		Runtimes: Runtimes{Done: s.Runtimes.Done, Failed: runtimes(s.Runtimes.Failed), Pending: runtimes(s.Runtimes.Pending)},
	}
	if s.WaveReadyAt != nil {
		t := s.WaveReadyAt.Time
		r.WaveReadyAt = &t
	}
	if ro.Spec.SoakTime.Duration > 0 {
		r.Soak = ro.Spec.SoakTime.Duration.String()
	}
	if rb := s.Rollback; rb != nil {
		r.Rollback = &RollbackStatus{By: rb.By, At: rb.At.Time, Of: rb.Of, Refused: rb.Refused}
	}
	for _, c := range s.Content {
		r.Content = append(r.Content, Content{Name: c.Name, Link: c.Link})
	}
	for _, c := range s.Conditions {
		r.Conditions = append(r.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	if c := meta.FindStatusCondition(s.Conditions, "Ready"); c != nil {
		r.Message = c.Message
	}
	return r
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	out := t.Time
	return &out
}

func runtimes(in []v1beta2.RolloutRuntime) []Runtime {
	var out []Runtime
	for _, rt := range in {
		out = append(out, Runtime{Kyma: rt.Kyma, Reason: rt.Reason})
	}
	return out
}

// WriteTable writes one row per rollout.
func WriteTable(w io.Writer, rollouts []Rollout) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMODULE\tCHANNEL\tPHASE\tFROM\tTO\tWAVE\tDONE\tIN FLIGHT\tFAILED")
	for _, r := range rollouts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%d\n", r.Name, r.Module, r.Channel, phase(r),
			cmp.Or(r.From, "-"), cmp.Or(r.To, "-"), wave(r.Wave), r.Done, r.Total, len(r.InFlight), r.FailedCount)
	}
	return tw.Flush()
}

// maxShown bounds each list of runtimes WriteDetail prints; the status
// names at most 20 per state anyway, except the wave in flight.
const maxShown = 20

// WriteDetail writes one rollout: where it stands, a progress bar, the
// runtimes by state with why they failed or wait, why it halted, who
// resumed or rolled it back, what it installs, and whether a planner looks
// at it.
func WriteDetail(w io.Writer, r Rollout, now time.Time) error {
	ago := func(t time.Time) string { return now.Sub(t).Round(time.Second).String() + " ago" }
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) + " (" + ago(t) + ")" }
	fmt.Fprintf(w, "Rollout %s: module %s, %s, %s → %s\n", r.Name, r.Module, channel(r.Channel), cmp.Or(r.From, "-"), cmp.Or(r.To, "-"))
	fmt.Fprintf(w, "Phase:     %s, wave %s\n", phase(r), wave(r.Wave))
	fmt.Fprintf(w, "Progress:  %s %d/%d done, %d in flight, %d pending, %d failed\n",
		bar(r.Done, r.Total, 30), r.Done, r.Total, len(r.InFlight), r.Pending, r.FailedCount)
	if r.StartedAt != nil {
		fmt.Fprintf(w, "Started:   %s\n", stamp(*r.StartedAt))
	}
	if r.WaveStartedAt != nil && r.CompletedAt == nil {
		wave := "started " + stamp(*r.WaveStartedAt)
		if r.WaveReadyAt != nil {
			wave += "; all Ready " + ago(*r.WaveReadyAt)
			if r.Soak != "" {
				wave += ", soaking for " + r.Soak
			}
		}
		fmt.Fprintf(w, "Wave:      %s\n", wave)
	}
	if r.CompletedAt != nil {
		fmt.Fprintf(w, "Completed: %s\n", stamp(*r.CompletedAt))
	}
	writeList(w, "In flight:", r.InFlight, len(r.InFlight), ", ")
	failed := r.Runtimes.Failed
	if len(failed) == 0 {
		for _, k := range r.Failed {
			failed = append(failed, Runtime{Kyma: k})
		}
	}
	writeList(w, "Failed:", withReasons(failed), int(r.FailedCount), "\n")
	writeList(w, "Pending:", withReasons(r.Runtimes.Pending), int(r.Pending), "\n")
	writeList(w, "Done:", r.Runtimes.Done, int(r.Done), ", ")
	if r.HaltReason != "" {
		fmt.Fprintf(w, "Halted:    %s\n", r.HaltReason)
	}
	if r.ResumedBy != "" {
		resumed := r.ResumedBy
		if r.ResumedAt != nil {
			resumed += ", " + ago(*r.ResumedAt)
		}
		fmt.Fprintf(w, "Resumed:   %s\n", resumed)
	}
	if rb := r.Rollback; rb != nil {
		what := fmt.Sprintf("%s, %s", rb.By, ago(rb.At))
		if rb.Of != "" {
			what += ", of " + rb.Of
		}
		if rb.Refused != "" {
			what += "; REFUSED: " + rb.Refused
		}
		fmt.Fprintf(w, "Rollback:  %s\n", what)
	}
	if r.Template != "" {
		fmt.Fprintf(w, "Template:  %s\n", r.Template)
	}
	for i, c := range r.Content {
		label := "Content:"
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(w, "%-10s %s %s\n", label, c.Name, c.Link)
	}
	fmt.Fprintf(w, "Planner:   %s\n", planner(r, now))
	for i, c := range r.Conditions {
		label := "Status:"
		if i > 0 {
			label = ""
		}
		line := fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
		if c.Message != "" {
			line += ": " + c.Message
		}
		fmt.Fprintf(w, "%-10s %s\n", label, line)
	}
	return nil
}

// planner says when a planner last looked at the rollout, and says it
// plainly when none has for longer than PlannerStaleAfter while the
// rollout should be moving: the Kymas hold its module then.
func planner(r Rollout, now time.Time) string {
	moving := r.Phase == "" || r.Phase == string(v1beta2.RolloutProgressing) || r.Phase == string(v1beta2.RolloutPaused)
	since, what := r.Created, "since the rollout was created"
	if r.PlannedAt != nil {
		since, what = *r.PlannedAt, "last at "+r.PlannedAt.UTC().Format(time.RFC3339)
	}
	age := now.Sub(since).Round(time.Second)
	switch {
	case moving && age > PlannerStaleAfter:
		return fmt.Sprintf("no planner has looked for %s (%s): every runtime holds the module, no wave starts or ends. "+
			"The planner is the operator, or shard 0's leader (docs/runbooks.md#lifecyclemanagerrolloutplannerabsent)", age, what)
	case r.PlannedAt == nil:
		return "not looked at yet"
	default:
		return fmt.Sprintf("looked %s ago", age)
	}
}

// withReasons are runtimes as "kyma: reason", or "kyma" without one.
func withReasons(rts []Runtime) []string {
	out := make([]string, 0, len(rts))
	for _, rt := range rts {
		if rt.Reason == "" {
			out = append(out, rt.Kyma)
		} else {
			out = append(out, rt.Kyma+": "+rt.Reason)
		}
	}
	return out
}

// writeList writes a labelled list of at most maxShown of named (joined by
// sep: ", " on one line, or a line each), and says how many of count more
// there are. Nothing when count is 0.
func writeList(w io.Writer, label string, named []string, count int, sep string) {
	if count == 0 && len(named) == 0 {
		return
	}
	shown := named[:min(len(named), maxShown)]
	items := slices.Clone(shown)
	if more := max(count, len(named)) - len(shown); more > 0 {
		if len(shown) == 0 {
			items = append(items, fmt.Sprintf("%d, none named", more))
		} else {
			items = append(items, fmt.Sprintf("… and %d more", more))
		}
	}
	if sep == "\n" {
		sep = "\n" + strings.Repeat(" ", 11)
	}
	fmt.Fprintf(w, "%-10s %s\n", label, strings.Join(items, sep))
}

// channel names a rollout's channel; a mandatory module's has none.
func channel(ch string) string {
	if ch == "" {
		return "mandatory (no channel)"
	}
	return "channel " + ch
}

func phase(r Rollout) string {
	if r.Paused && r.Phase != string(v1beta2.RolloutPaused) {
		return cmp.Or(r.Phase, "-") + " (pausing)"
	}
	return cmp.Or(r.Phase, "-")
}

func wave(w int32) string {
	switch {
	case w < 0:
		return "-"
	case w == 0:
		return "canary"
	default:
		return fmt.Sprint(w)
	}
}

// bar draws done of total in width cells.
func bar(done, total int32, width int) string {
	filled := 0
	if total > 0 {
		filled = int(done) * width / int(total)
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}
