// Package history is lmctl's view of the operation history (SPEC G4): what
// the operator did to a runtime's modules, newest first, from the Kyma's
// Manifests and, for modules removed since, from the Kyma itself
// (lmctl history RUNTIME [MODULE]).
package history

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// Entry is one operation as lmctl shows it: stable field names for scripts
// (-o json|yaml).
type Entry struct {
	Runtime    string     `json:"runtime"`
	Module     string     `json:"module"`
	Type       string     `json:"type"`
	From       string     `json:"from,omitempty"`
	To         string     `json:"to,omitempty"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Seconds is how long it took, or has taken so far.
	Seconds float64 `json:"seconds"`
	Result  string  `json:"result"`
	Code    string  `json:"code,omitempty"`
	// NeedsHuman is true for a Failed result: the operator does not retry
	// it by itself.
	NeedsHuman bool `json:"needsHuman"`
}

// Read collects the operations of runtime (a Kyma's name) in namespace,
// of module only when set, newest first. now measures operations still
// under way.
func Read(ctx context.Context, c client.Reader, namespace, runtime, module string, now time.Time) ([]Entry, error) {
	kyma := &v1beta2.Kyma{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: runtime}, kyma); err != nil {
		return nil, fmt.Errorf("reading Kyma %s/%s: %w", namespace, runtime, err)
	}
	manifests := &v1beta2.ManifestList{}
	if err := c.List(ctx, manifests, client.InNamespace(namespace), client.MatchingLabels{v1beta2.KymaNameLabel: runtime}); err != nil {
		return nil, fmt.Errorf("listing the Manifests of Kyma %s/%s: %w", namespace, runtime, err)
	}
	var out []Entry
	add := func(moduleName string, op v1beta2.Operation) {
		if module != "" && moduleName != module {
			return
		}
		out = append(out, entryOf(runtime, moduleName, op, now))
	}
	for i := range manifests.Items {
		m := &manifests.Items[i]
		name := cmp.Or(m.Spec.ModuleName, m.Labels[v1beta2.ModuleNameLabel])
		for _, op := range m.Status.Operations {
			add(name, op)
		}
	}
	for _, op := range kyma.Status.Operations {
		add(op.Module, op)
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(a.Module, b.Module))
	})
	return out, nil
}

func entryOf(runtime, module string, op v1beta2.Operation, now time.Time) Entry {
	e := Entry{
		Runtime: runtime, Module: module, Type: string(op.Type), From: op.FromVersion, To: op.ToVersion,
		StartedAt: op.StartedAt.UTC(), Result: string(op.Result), Code: op.Code,
		NeedsHuman: op.Result == v1beta2.OperationFailed,
	}
	end := now
	if op.FinishedAt != nil {
		finished := op.FinishedAt.UTC()
		e.FinishedAt = &finished
		end = finished
	}
	e.Seconds = max(0, end.Sub(e.StartedAt).Seconds())
	return e
}

// WriteTable writes the entries as a table, newest first as given.
func WriteTable(w io.Writer, entries []Entry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tMODULE\tOPERATION\tVERSIONS\tTOOK\tRESULT")
	for _, e := range entries {
		took := (time.Duration(e.Seconds) * time.Second).String()
		if e.FinishedAt == nil {
			took += " so far"
		}
		result := e.Result
		switch {
		case e.NeedsHuman:
			result += " (" + e.Code + "; needs a human)"
		case e.Code != "":
			result += " (" + e.Code + "; retrying)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.StartedAt.Format(time.RFC3339), e.Module, e.Type, versions(e), took, result)
	}
	return tw.Flush()
}

func versions(e Entry) string {
	switch {
	case e.From == "" && e.To == "":
		return "-"
	case e.From == "":
		return e.To
	case e.To == "":
		return e.From + " →"
	case e.From == e.To:
		return e.To
	}
	return e.From + " → " + e.To
}
