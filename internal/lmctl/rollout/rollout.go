// Package rollout is lmctl's view of ModuleRollouts: the rollouts of a
// control plane at a glance, one rollout in detail, and pausing and
// resuming one (lmctl rollout status|pause|resume).
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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
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
	Wave        int32      `json:"wave"`
	Done        int32      `json:"done"`
	Total       int32      `json:"total"`
	Pending     int32      `json:"pending"`
	InFlight    []string   `json:"inFlight,omitempty"`
	Failed      []string   `json:"failed,omitempty"`
	FailedCount int32      `json:"failedCount"`
	HaltReason  string     `json:"haltReason,omitempty"`
	ResumedBy   string     `json:"resumedBy,omitempty"`
	Message     string     `json:"message,omitempty"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
}

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

func patchSpec(ctx context.Context, c client.Client, namespace, name string, spec map[string]any) error {
	ro := &v1beta2.ModuleRollout{}
	ro.SetNamespace(namespace)
	ro.SetName(name)
	body, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, ro, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("patching the spec of ModuleRollout %s/%s: %w", namespace, name, err)
	}
	return nil
}

func of(ro *v1beta2.ModuleRollout) Rollout {
	s := ro.Status
	r := Rollout{
		Name: ro.Name, Module: ro.Spec.ModuleName, Channel: ro.Spec.Channel, Phase: string(s.Phase), Paused: ro.Spec.Paused,
		From: s.FromVersion, To: s.ToVersion, Wave: s.Wave, Done: s.Done, Total: s.Total, Pending: s.Pending,
		InFlight: s.InFlight, Failed: s.Failed, FailedCount: s.FailedCount, HaltReason: s.HaltReason,
		ResumedBy: s.ResumedBy,
	}
	if c := meta.FindStatusCondition(s.Conditions, "Ready"); c != nil {
		r.Message = c.Message
	}
	if s.StartedAt != nil {
		t := s.StartedAt.Time
		r.StartedAt = &t
	}
	if s.CompletedAt != nil {
		t := s.CompletedAt.Time
		r.CompletedAt = &t
	}
	return r
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

// WriteDetail writes one rollout: where it stands, a progress bar, who is
// in flight and who failed, and why it halted.
func WriteDetail(w io.Writer, r Rollout, now time.Time) error {
	fmt.Fprintf(w, "Rollout %s: module %s, channel %s, %s → %s\n", r.Name, r.Module, r.Channel, cmp.Or(r.From, "-"), cmp.Or(r.To, "-"))
	fmt.Fprintf(w, "Phase:     %s, wave %s\n", phase(r), wave(r.Wave))
	fmt.Fprintf(w, "Progress:  %s %d/%d done, %d pending, %d failed\n", bar(r.Done, r.Total, 30), r.Done, r.Total, r.Pending, r.FailedCount)
	if r.StartedAt != nil {
		fmt.Fprintf(w, "Started:   %s (%s ago)\n", r.StartedAt.UTC().Format(time.RFC3339), now.Sub(*r.StartedAt).Round(time.Second))
	}
	if r.CompletedAt != nil {
		fmt.Fprintf(w, "Completed: %s\n", r.CompletedAt.UTC().Format(time.RFC3339))
	}
	if len(r.InFlight) > 0 {
		fmt.Fprintf(w, "In flight: %s\n", strings.Join(r.InFlight, ", "))
	}
	if len(r.Failed) > 0 {
		fmt.Fprintf(w, "Failed:    %s\n", strings.Join(r.Failed, ", "))
	}
	if r.ResumedBy != "" {
		fmt.Fprintf(w, "Resumed:   %s\n", r.ResumedBy)
	}
	if r.HaltReason != "" {
		fmt.Fprintf(w, "Halted:    %s\n", r.HaltReason)
	}
	if r.Message != "" {
		fmt.Fprintf(w, "Status:    %s\n", r.Message)
	}
	return nil
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
