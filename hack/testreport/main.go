// Command testreport reads the events of `go test -json` runs (the files
// gotestsum writes with --jsonfile) and prints what a long run should end
// with: the time of each package, slowest first; every failed test with its
// package and its own output (the failure lines: the test's t.Error, t.Fatal
// and t.Log lines, without go test's === RUN framing); packages that failed
// outside any test (TestMain, a timeout panic, a build error); and one closing
// line of counts. hack/gotest.sh runs it after gotestsum, for make test and
// make test-stress.
//
// It exits 0 whatever it read: the exit code of the run is go test's.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	label := flag.String("label", "test", "word that starts the closing line")
	module := flag.String("module", "", "module path left out of package names (`go list -m`)")
	maxLines := flag.Int("max-lines", 60, "failure lines printed per failed test or package, the first and the last half (all are in the full output above)")
	flag.Parse()
	var events []event
	for _, path := range flag.Args() {
		evs, err := readFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(1)
		}
		for i := range evs {
			evs[i].Package = shortName(evs[i].Package, *module)
		}
		events = append(events, evs...)
	}
	summarize(events).print(os.Stdout, *label, *maxLines)
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// shortName is pkg relative to the module, as gotestsum shows it.
func shortName(pkg, module string) string {
	if module == "" {
		return pkg
	}
	if pkg == module {
		return "."
	}
	return strings.TrimPrefix(pkg, module+"/")
}

func readFile(path string) ([]event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f)
}

// read parses events; lines that are not JSON (a build error that go test
// printed on stdout) are kept as package-less output.
func read(r io.Reader) ([]event, error) {
	var events []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			e = event{Action: "output", Output: sc.Text() + "\n"}
		}
		events = append(events, e)
	}
	return events, sc.Err()
}

// failure is one failed run of a test, or a package that failed with no
// failed test.
type failure struct {
	Package string
	Test    string // empty for a package-level failure
	Lines   []string
}

type packageTime struct {
	Package string
	Result  string
	Elapsed time.Duration
}

type report struct {
	Packages                []packageTime
	Failures                []failure
	Passed, Failed, Skipped int
}

// summarize folds the events into a report. A test that ran several times
// (-count=N) is counted, and listed when it failed, once per run.
func summarize(events []event) report {
	type key struct{ pkg, test string }
	var r report
	output := map[key][]string{}
	failedTests := map[string]int{}
	for _, e := range events {
		k := key{e.Package, e.Test}
		switch e.Action {
		case "run":
			output[k] = nil
		case "output":
			output[k] = append(output[k], strings.TrimRight(e.Output, "\n"))
		case "pass", "fail", "skip":
			if e.Test == "" {
				if e.Package == "" {
					continue
				}
				r.Packages = append(r.Packages, packageTime{e.Package, e.Action, time.Duration(e.Elapsed * float64(time.Second))})
				if e.Action == "fail" && failedTests[e.Package] == 0 {
					r.Failures = append(r.Failures, failure{Package: e.Package, Lines: failureLines(output[k])})
				}
				delete(output, k)
				continue
			}
			switch e.Action {
			case "pass":
				r.Passed++
			case "skip":
				r.Skipped++
			case "fail":
				r.Failed++
				failedTests[e.Package]++
				r.Failures = append(r.Failures, failure{Package: e.Package, Test: e.Test, Lines: failureLines(output[k])})
			}
			delete(output, k)
		}
	}
	// Output outside any package: build errors printed as plain text.
	if lines := failureLines(output[key{}]); len(lines) > 0 {
		r.Failures = append(r.Failures, failure{Lines: lines})
	}
	slices.SortStableFunc(r.Packages, func(a, b packageTime) int { return cmp.Compare(b.Elapsed, a.Elapsed) })
	return r
}

// failureLines drops go test's framing (=== RUN, --- PASS, the ok/FAIL line
// of a package) from a test's or a package's output; what is left is what
// the test or TestMain printed, the failure messages among it.
func failureLines(out []string) []string {
	var lines []string
	for _, l := range out {
		t := strings.TrimSpace(l)
		switch {
		case t == "", t == "PASS", t == "FAIL",
			strings.HasPrefix(t, "=== RUN"), strings.HasPrefix(t, "=== PAUSE"), strings.HasPrefix(t, "=== CONT"),
			strings.HasPrefix(t, "=== NAME"), strings.HasPrefix(t, "--- PASS"), strings.HasPrefix(t, "--- SKIP"),
			strings.HasPrefix(t, "--- FAIL"),
			strings.HasPrefix(t, "ok  "), strings.HasPrefix(t, "FAIL\t"), strings.HasPrefix(t, "?   "):
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

func (r report) print(w io.Writer, label string, maxLines int) {
	fmt.Fprintf(w, "\n== Package times, slowest first\n")
	for _, p := range r.Packages {
		if p.Result == "skip" {
			continue // no test files
		}
		fmt.Fprintf(w, "%8.1fs  %-4s  %s\n", p.Elapsed.Seconds(), p.Result, p.Package)
	}
	if len(r.Failures) > 0 {
		fmt.Fprintf(w, "\n== Failures (%d)\n", len(r.Failures))
		for _, f := range r.Failures {
			switch {
			case f.Test != "":
				fmt.Fprintf(w, "--- FAIL: %s (%s)\n", f.Test, f.Package)
			case f.Package != "":
				fmt.Fprintf(w, "--- FAIL: package %s, outside any test\n", f.Package)
			default:
				fmt.Fprintf(w, "--- FAIL: build\n")
			}
			for _, l := range shorten(f.Lines, maxLines) {
				fmt.Fprintln(w, l)
			}
		}
	}
	failedPackages := 0
	for _, p := range r.Packages {
		if p.Result == "fail" {
			failedPackages++
		}
	}
	fmt.Fprintf(w, "\n%d of %d packages failed; tests and subtests, counted once per run:\n",
		failedPackages, len(r.Packages)-countSkipped(r.Packages))
	// The closing line, in the plain form that any reader of test logs
	// (CI among them) understands.
	fmt.Fprintf(w, "%s: %d passed, %d failed, %d skipped\n", label, r.Passed, r.Failed, r.Skipped)
}

// shorten keeps the first and the last of more than n lines: a failure's
// message starts a long dump (gomega prints whole objects) and the test's
// last words end it; the full output is printed above the report.
func shorten(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	head := n / 2
	tail := n - head
	out := append([]string{}, lines[:head]...)
	out = append(out, fmt.Sprintf("    ... %d lines left out here (all of them are in the output above) ...", len(lines)-n))
	return append(out, lines[len(lines)-tail:]...)
}

func countSkipped(ps []packageTime) int {
	n := 0
	for _, p := range ps {
		if p.Result == "skip" {
			n++
		}
	}
	return n
}
