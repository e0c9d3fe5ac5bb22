package status

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
)

// WriteTable writes one row per runtime. now is passed in so that ages are
// computed once per table, and so that tests are deterministic.
func WriteTable(w io.Writer, f Fleet, now time.Time) error {
	tw := output.NewTabWriter(w)
	fmt.Fprintln(tw, "NAME\tRUNTIME-ID\tSTATE\tMODULES\tAGE\tPAUSED")
	for _, rt := range f.Runtimes {
		paused := "-"
		if rt.Paused != "" {
			paused = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n",
			rt.Name, orDash(rt.RuntimeID), stateOrDash(rt.State), rt.ModulesReady, rt.ModulesTotal, age(rt.Created, now), paused)
	}
	return tw.Flush()
}

// WriteModules writes one row per module of a runtime. Messages are written
// in full: they are what a person looks at this view for.
func WriteModules(w io.Writer, rt Runtime) error {
	tw := output.NewTabWriter(w)
	fmt.Fprintln(tw, "NAME\tVERSION\tCHANNEL\tSTATE\tMESSAGE")
	for _, m := range rt.Modules {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n",
			m.Name, orDash(m.Version), orDash(m.Channel), stateOrDash(m.State), oneLine(m.Message))
	}
	return tw.Flush()
}

func age(created, now time.Time) string {
	if created.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(created))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// stateOrDash shows a state the operator has not reported yet as "-", not
// as an empty cell that would shift the columns a reader scans.
func stateOrDash(s v1beta2.State) string {
	return orDash(string(s))
}

// oneLine keeps a multi-line message (a Helm error, a log tail) from
// breaking the table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
