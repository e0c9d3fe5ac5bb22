package klm

import (
	"fmt"
	"io"
	"strings"

	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// WritePlan prints a plan: one row per Kyma and the totals, then, for a
// single Kyma, each module and what is left.
func WritePlan(w io.Writer, p *Plan) error {
	tw := output.NewTabWriter(w)
	fmt.Fprintln(tw, "KYMA\tLABELLED\tKLM MANIFESTS\tTAKE OVER\tLEFT\tGONE\tKLM FINALIZERS\tKLM AGENT\tCATALOG COPIES\tRUNTIME")
	for _, k := range p.Kymas {
		var manifests, take, left, gone int
		for _, m := range k.Modules {
			if m.KLMManifest != "" {
				manifests++
			}
			take, left, gone = take+m.TakeOver, left+m.LeftCount, gone+m.Gone
		}
		agent, copies, runtime := "-", "-", "ok"
		if k.Runtime != nil {
			agent, copies = fmt.Sprint(len(k.Runtime.Agent)), fmt.Sprint(k.Runtime.CatalogCopies)
		}
		if k.RuntimeError != "" {
			runtime = "unreachable: " + k.RuntimeError
		}
		fmt.Fprintf(tw, "%s\t%t\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", k.Kyma, k.Labelled, manifests, take, left, gone, list(k.KLMFinalizers), agent, copies, runtime)
	}
	fmt.Fprintf(tw, "TOTAL\t\t%d\t%d\t%d\t%d\t\t\t\t%d Kymas\n", p.Totals.KLMManifests, p.Totals.TakeOver, p.Totals.Left, p.Totals.Gone, p.Totals.Kymas)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\n", policies(p.Totals))
	if len(p.Kymas) != 1 {
		return nil
	}
	k := p.Kymas[0]
	fmt.Fprintln(w)
	tw = output.NewTabWriter(w)
	fmt.Fprintln(tw, "MODULE\tKLM MANIFEST\tVERSION\tTAKE OVER\tLEFT (NOT KLM'S)\tGONE\tDEFAULT CR\tTHIS OPERATOR'S MANIFEST")
	for _, m := range k.Modules {
		if m.KLMManifest == "" {
			continue
		}
		ours := "-"
		if m.Manifest != "" {
			ours = m.Manifest
			if m.TakenOver == nil {
				ours += " (has not taken over)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", m.Module, m.KLMManifest, m.Version, m.TakeOver, leftOf(m), m.Gone, dash(m.DefaultCR), ours)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if k.Runtime != nil && len(k.Runtime.KymaManagers) > 0 {
		fmt.Fprintf(w, "\nThe runtime's Kyma has KLM's field managers %s.\n", strings.Join(k.Runtime.KymaManagers, ", "))
	}
	return nil
}

// WriteStatus prints what was taken over: per module, the Manifest, the
// KLM Manifest it took over, how many objects and when; what is left of
// KLM.
func WriteStatus(w io.Writer, p *Plan) error {
	tw := output.NewTabWriter(w)
	fmt.Fprintln(tw, "KYMA\tMODULE\tMANIFEST\tTAKEN OVER FROM\tOBJECTS\tAT\tKLM LEFT")
	for _, k := range p.Kymas {
		var leftovers []string
		if len(k.KLMFinalizers) > 0 {
			leftovers = append(leftovers, "finalizers "+list(k.KLMFinalizers))
		}
		if k.Runtime != nil {
			if len(k.Runtime.Agent) > 0 {
				leftovers = append(leftovers, fmt.Sprintf("%d agent objects", len(k.Runtime.Agent)))
			}
			if k.Runtime.CatalogCopies > 0 {
				leftovers = append(leftovers, fmt.Sprintf("%d catalog copies", k.Runtime.CatalogCopies))
			}
			if len(k.Runtime.KymaManagers) > 0 {
				leftovers = append(leftovers, "runtime Kyma managers "+list(k.Runtime.KymaManagers))
			}
		}
		if k.RuntimeError != "" {
			leftovers = append(leftovers, "runtime unreachable: "+k.RuntimeError)
		}
		if len(k.Modules) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\n", k.Kyma, dash(strings.Join(leftovers, "; ")))
		}
		for _, m := range k.Modules {
			from, objects, at, left := "-", "-", "-", leftovers
			if m.TakenOver != nil {
				from, objects, at = m.TakenOver.Manifest, fmt.Sprint(m.TakenOver.Objects), m.TakenOver.Time.UTC().Format("2006-01-02 15:04:05")
			}
			if m.KLMManifest != "" {
				left = append(left, "Manifest "+m.KLMManifest)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Kyma, m.Module, dash(m.Manifest), from, objects, at, dash(strings.Join(left, "; ")))
		}
	}
	fmt.Fprintf(tw, "TOTAL\t\t\t\t%d\t\t%d KLM Manifests\n", p.Totals.TakenOver, p.Totals.KLMManifests)
	return tw.Flush()
}

// policies says what each value of --klm-takeover would take over: lmctl
// cannot read the operator's flag.
func policies(t Totals) string {
	return fmt.Sprintf("--klm-takeover=off takes over no Kyma; labelled takes over the %d of %d Kymas labelled %s=true; all takes over all %d.",
		t.Labelled, t.Kymas, takeover.Label, t.Kymas)
}

func leftOf(m ModulePlan) string {
	if m.LeftCount == 0 {
		return "0"
	}
	s := fmt.Sprintf("%d: %s", m.LeftCount, strings.Join(m.Left, ", "))
	if m.LeftCount > len(m.Left) {
		s += ", …"
	}
	return s
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
