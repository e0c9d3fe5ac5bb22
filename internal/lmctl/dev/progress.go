package dev

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/status"
)

// moduleKey is one module of one runtime.
type moduleKey struct {
	runtime, module string
}

func (k moduleKey) String() string { return k.runtime + "/" + k.module }

// change is a module whose state or version changed between two looks at
// the fleet, or that is gone from its runtime's Kyma (removed).
type change struct {
	key      moduleKey
	from, to v1beta2.State
	version  string
	message  string
	removed  bool
}

// tracker remembers what it last saw of every module, and since when a
// module has been in Error with the same message: an error that does not
// move is one waiting will not fix.
type tracker struct {
	last       map[moduleKey]status.Module
	errorSince map[moduleKey]time.Time
}

func newTracker() *tracker {
	return &tracker{last: map[moduleKey]status.Module{}, errorSince: map[moduleKey]time.Time{}}
}

// observe records the fleet as seen at now and returns what changed, in the
// fleet's order (runtimes, then modules, by name), removals last.
func (t *tracker) observe(now time.Time, f status.Fleet) []change {
	var changes []change
	seen := map[moduleKey]bool{}
	for _, rt := range f.Runtimes {
		for _, m := range rt.Modules {
			key := moduleKey{rt.Name, m.Name}
			seen[key] = true
			prev, known := t.last[key]
			if !known || prev.State != m.State || prev.Version != m.Version {
				changes = append(changes, change{key: key, from: prev.State, to: m.State, version: m.Version, message: m.Message})
			}
			if m.State == v1beta2.StateError {
				if !known || prev.State != v1beta2.StateError || prev.Message != m.Message {
					t.errorSince[key] = now
				}
			} else {
				delete(t.errorSince, key)
			}
			t.last[key] = m
		}
	}
	for key, prev := range t.last {
		if !seen[key] {
			changes = append(changes, change{key: key, from: prev.State, version: prev.Version, removed: true})
			delete(t.last, key)
			delete(t.errorSince, key)
		}
	}
	return changes
}

// stuck returns the modules that have been in Error with the same message
// for at least grace, by name.
func (t *tracker) stuck(now time.Time, grace time.Duration) []moduleKey {
	var keys []moduleKey
	for key, since := range t.errorSince {
		if now.Sub(since) >= grace {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b moduleKey) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// formatChange is the plain line for one change, for logs and terminals
// alike: when (elapsed time while converging, time of day afterwards),
// where, the new state, version and, unless Ready, why.
func formatChange(when string, c change) string {
	state := stateName(c.to)
	if c.removed {
		state = "removed"
	}
	line := fmt.Sprintf("%8s  %-12s %-12s %-10s %s", when, c.key.runtime, c.key.module, state, dash(c.version))
	if c.message != "" && c.to != v1beta2.StateReady {
		line += "  " + oneLine(c.message)
	}
	return strings.TrimRight(line, " ")
}

// stateName shows a module the operator has not reported on yet as
// Pending: it is listed in the Kyma and waiting for its first reconcile.
func stateName(s v1beta2.State) string {
	if s == "" {
		return "Pending"
	}
	return string(s)
}

// renderProgress is the live table on a terminal: a progress bar over all
// modules, then one row per module of every runtime, each cut to width so
// that no row wraps and the redraw stays in place.
func renderProgress(f status.Fleet, elapsed time.Duration, width int) []string {
	ready, total := f.ModuleCounts()
	lines := []string{
		fmt.Sprintf("Waiting for %s in %s to be Ready  %s %d/%d  %s",
			plural(total, "module"), plural(len(f.Runtimes), "runtime"), bar(ready, total, 20), ready, total, formatElapsed(elapsed)),
	}
	rows := [][]string{{"RUNTIME", "MODULE", "VERSION", "STATE", "MESSAGE"}}
	for _, rt := range f.Runtimes {
		if len(rt.Modules) == 0 {
			rows = append(rows, []string{rt.Name, "-", "-", dash(string(rt.State)), oneLine(rt.Message)})
		}
		for _, m := range rt.Modules {
			state := stateName(m.State)
			message := ""
			if m.State != v1beta2.StateReady {
				message = oneLine(m.Message)
			}
			rows = append(rows, []string{rt.Name, m.Name, dash(m.Version), state, message})
		}
	}
	for _, row := range columns(rows) {
		lines = append(lines, "  "+row)
	}
	for i := range lines {
		lines[i] = truncate(strings.TrimRight(lines[i], " "), width)
	}
	return lines
}

// columns pads every column but the last to its widest cell.
func columns(rows [][]string) []string {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(cell))
		}
	}
	out := make([]string, 0, len(rows))
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i < len(row)-1 {
				fmt.Fprintf(&b, "%-*s  ", widths[i], cell)
			} else {
				b.WriteString(cell)
			}
		}
		out = append(out, b.String())
	}
	return out
}

func bar(done, total, width int) string {
	filled := 0
	if total > 0 {
		filled = done * width / total
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}

// notReadyReport lists, one line each, every module that is not Ready and
// every runtime whose trouble is not a module's (an unreachable runtime).
func notReadyReport(f status.Fleet) []string {
	var lines []string
	for _, rt := range f.Runtimes {
		moduleTrouble := false
		for _, m := range rt.Modules {
			if m.State == v1beta2.StateReady || m.State == v1beta2.StateUnmanaged {
				continue
			}
			moduleTrouble = true
			lines = append(lines, withReason(fmt.Sprintf("%s/%s %s", rt.Name, m.Name, stateName(m.State)), m.Message))
		}
		if !moduleTrouble && !rt.Ready() {
			lines = append(lines, withReason(fmt.Sprintf("%s %s", rt.Name, stateName(rt.State)), rt.Message))
		}
	}
	return lines
}

func withReason(what, why string) string {
	if why == "" {
		return what
	}
	return what + ": " + oneLine(why)
}

// allReady reports whether the fleet has the expected runtimes and every
// one of them, with every module, is Ready.
func allReady(f status.Fleet, runtimes int) bool {
	if len(f.Runtimes) < runtimes {
		return false
	}
	for _, rt := range f.Runtimes {
		if !rt.Ready() || rt.ModulesTotal == 0 {
			return false
		}
	}
	return true
}

// liveTable redraws the progress table in place on a terminal.
type liveTable struct {
	out   io.Writer
	drawn int
}

func (l *liveTable) draw(lines []string) {
	if l.drawn > 0 {
		// Back to the first line of the last drawing, and clear to the end.
		fmt.Fprintf(l.out, "\x1b[%dF\x1b[J", l.drawn)
	}
	for _, line := range lines {
		fmt.Fprintln(l.out, line)
	}
	l.drawn = len(lines)
}

func formatElapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
