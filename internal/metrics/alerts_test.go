package metrics_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/internal/install"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// repoRoot is where the chart, config/ and docs/ are, seen from this
// package's directory (where go test runs).
const repoRoot = "../.."

// docsBaseURL is the chart's default docsBaseURL, under which runbooks are
// linked.
const docsBaseURL = "https://github.com/runtime-fleet/lifecycle-manager/blob/main/docs"

// targetLabels are the labels Prometheus gives every series of a scraped
// target (the Prometheus Operator adds namespace, pod and service), which
// rules may match and group by although no collector declares them.
var targetLabels = []string{"namespace", "pod", "service", "job", "instance"}

// alertRule is one alerting rule of a PrometheusRule.
type alertRule struct {
	Alert, Expr, For, Severity, Summary, Runbook string
}

// alertRules are the alerting rules of the PrometheusRules among objs.
func alertRules(t *testing.T, objs []*unstructured.Unstructured) []alertRule {
	t.Helper()
	var out []alertRule
	for _, obj := range objs {
		if obj.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, err := unstructured.NestedSlice(obj.Object, "spec", "groups")
		if err != nil {
			t.Fatal(err)
		}
		for _, group := range groups {
			rules, _, _ := unstructured.NestedSlice(group.(map[string]any), "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				str := func(fields ...string) string {
					s, _, _ := unstructured.NestedString(rule, fields...)
					return s
				}
				if str("alert") == "" {
					continue
				}
				out = append(out, alertRule{
					Alert: str("alert"), Expr: str("expr"), For: str("for"), Severity: str("labels", "severity"),
					Summary: str("annotations", "summary"), Runbook: str("annotations", "runbook_url"),
				})
			}
		}
	}
	return out
}

// shippedRules are the alerting rules of the chart (rendered with its
// PrometheusRule on) and of config/prometheus, which `make manifests`
// generates from it.
func shippedRules(t *testing.T) (chart, kustomize []alertRule, dashboard string) {
	t.Helper()
	on := map[string]any{"enabled": true}
	rendered, err := install.RenderChart(filepath.Join(repoRoot, "charts", "lifecycle-manager"), "kcp-system", map[string]any{"prometheusRule": on, "dashboard": on})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range rendered.Objects() {
		if s, ok, _ := unstructured.NestedString(obj.Object, "data", "lifecycle-manager.json"); ok && obj.GetKind() == "ConfigMap" {
			dashboard = s
		}
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "config", "prometheus", "monitoring.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.Raw(data)
	if err != nil {
		t.Fatal(err)
	}
	return alertRules(t, rendered.Objects()), alertRules(t, objs), dashboard
}

// registered are the operator's metric families and their variable
// labels, from the collectors it registers.
func registered(t *testing.T) map[string][]string {
	t.Helper()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	variable := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	for _, c := range metrics.OperatorCollectors() {
		ch := make(chan *prometheus.Desc, 16)
		c.Describe(ch)
		close(ch)
		for desc := range ch {
			s := desc.String()
			name, labels := fqName.FindStringSubmatch(s), variable.FindStringSubmatch(s)
			if name == nil || labels == nil {
				t.Fatalf("cannot read the name and labels of %s", s)
			}
			out[name[1]] = nil
			if labels[1] != "" {
				out[name[1]] = strings.Split(labels[1], ",")
			}
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives the headings of a Markdown
// file: lower case, spaces to hyphens, other punctuation dropped.
func headingAnchors(markdown string) []string {
	var out []string
	for line := range strings.SplitSeq(markdown, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range text {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

var (
	// operatorSeries finds the operator's own series in PromQL.
	operatorSeries = regexp.MustCompile(`\blifecycle_manager_[a-z_]+\b`)
	// selector is a series of the operator with label matchers.
	selector = regexp.MustCompile(`\b(lifecycle_manager_[a-z_]+)\{([^}]*)\}`)
	// matcher is one label matcher of a selector.
	matcher = regexp.MustCompile(`\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// grouping is an aggregation by labels directly over a series.
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)\s*\(\s*(lifecycle_manager_[a-z_]+)\b`)
)

// family is the metric family a series name belongs to (a histogram's
// buckets, sum and count to the histogram), and the labels the series may
// have beyond the family's.
func family(name string, known map[string][]string) (string, []string) {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if registeredName(known, base) {
				if suffix == "_bucket" {
					return base, []string{"le"}
				}
				return base, nil
			}
		}
	}
	return name, nil
}

func registeredName(known map[string][]string, name string) bool {
	_, ok := known[name]
	return ok
}

// checkQuery says what is wrong with a PromQL query over the operator's
// series: a series it does not register, a label its series do not have,
// brackets that do not pair.
func checkQuery(query string, known map[string][]string) []string {
	var problems []string
	for _, name := range operatorSeries.FindAllString(query, -1) {
		if base, _ := family(name, known); !registeredName(known, base) {
			problems = append(problems, fmt.Sprintf("queries %s, which the operator does not register", name))
		}
	}
	hasLabel := func(name, label string) bool {
		base, extra := family(name, known)
		return slices.Contains(known[base], label) || slices.Contains(extra, label) || slices.Contains(targetLabels, label)
	}
	for _, m := range selector.FindAllStringSubmatch(query, -1) {
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			if !hasLabel(m[1], l[1]) {
				problems = append(problems, fmt.Sprintf("matches label %s of %s, which has %v", l[1], m[1], known[m[1]]))
			}
		}
	}
	for _, m := range grouping.FindAllStringSubmatch(query, -1) {
		for l := range strings.SplitSeq(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !hasLabel(m[2], l) {
				problems = append(problems, fmt.Sprintf("aggregates %s by %s, a label it does not have (%v)", m[2], l, known[m[2]]))
			}
		}
	}
	depth := map[rune]int{}
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for _, r := range query {
		switch r {
		case '(', '[', '{':
			depth[r]++
		case ')', ']', '}':
			if depth[pairs[r]]--; depth[pairs[r]] < 0 {
				problems = append(problems, fmt.Sprintf("closes %q without opening it", r))
			}
		}
	}
	for r, d := range depth {
		if d > 0 {
			problems = append(problems, fmt.Sprintf("leaves %d %q open", d, r))
		}
	}
	return problems
}

// Every alert the project ships can be acted on: it has a summary, a
// severity and a duration, its runbook is a section that exists, and its
// query reads series and labels the operator registers. The chart and
// config/prometheus ship the same alerts, and every runbook section has
// its alert. A Go test, since Prometheus (promtool) is not a dependency:
// it does not parse PromQL in full, but catches a renamed metric or label,
// a runbook link that leads nowhere, and unpaired brackets.
func TestShippedAlertsHaveRunbooksAndRegisteredSeries(t *testing.T) {
	chart, kustomize, dashboard := shippedRules(t)
	if len(chart) == 0 {
		t.Fatal("the chart renders no alerting rule")
	}
	if !slices.Equal(chart, kustomize) {
		t.Errorf("config/prometheus/monitoring.yaml has other alerts than the chart; run make manifests:\nchart:     %v\nkustomize: %v", chart, kustomize)
	}
	known := registered(t)
	runbooks := map[string][]string{}
	var names []string
	for _, rule := range chart {
		names = append(names, rule.Alert)
		t.Run(rule.Alert, func(t *testing.T) {
			if rule.Summary == "" || rule.Severity == "" || rule.For == "" {
				t.Errorf("summary %q, severity %q, for %q: all three are needed", rule.Summary, rule.Severity, rule.For)
			}
			// A URL an on-call engineer can open from the alert, under the
			// chart's docsBaseURL, of a section that exists in docs/.
			page, anchor, ok := strings.Cut(rule.Runbook, "#")
			file, inDocs := strings.CutPrefix(page, docsBaseURL+"/")
			if !ok || !inDocs || anchor != strings.ToLower(rule.Alert) {
				t.Fatalf("runbook_url %q: want %s/<file>.md#%s", rule.Runbook, docsBaseURL, strings.ToLower(rule.Alert))
			}
			file = "docs/" + file
			if _, read := runbooks[file]; !read {
				data, err := os.ReadFile(filepath.Join(repoRoot, file))
				if err != nil {
					t.Fatalf("runbook: %v", err)
				}
				runbooks[file] = headingAnchors(string(data))
			}
			if !slices.Contains(runbooks[file], anchor) {
				t.Errorf("runbook %s has no section #%s", file, anchor)
			}
			if !operatorSeries.MatchString(rule.Expr) && !strings.Contains(rule.Expr, "controller_runtime_") && !strings.Contains(rule.Expr, "workqueue_") {
				t.Errorf("expr %q reads none of the operator's series", rule.Expr)
			}
			for _, problem := range checkQuery(rule.Expr, known) {
				t.Errorf("expr %q %s", rule.Expr, problem)
			}
		})
	}
	for _, problem := range checkQuery(dashboard, known) {
		t.Errorf("the dashboard %s", problem)
	}
	// Every runbook section of an alert has its alert.
	for file, anchors := range runbooks {
		for _, anchor := range anchors {
			if strings.HasPrefix(anchor, "lifecyclemanager") && !slices.ContainsFunc(names, func(n string) bool { return strings.ToLower(n) == anchor }) {
				t.Errorf("%s has a runbook #%s for an alert the chart does not ship", file, anchor)
			}
		}
	}
	for _, want := range []string{"LifecycleManagerRolloutHalted", "LifecycleManagerRolloutNoProgress", "LifecycleManagerRolloutPlannerAbsent", "LifecycleManagerNoLeader", "LifecycleManagerShardAbsent"} {
		if !slices.Contains(names, want) {
			t.Errorf("the chart ships no alert %s", want)
		}
	}
}

// The query checks find what they are for.
func TestCheckQuery(t *testing.T) {
	known := map[string][]string{
		"lifecycle_manager_rollout_halted":               {"rollout", "module", "channel"},
		"lifecycle_manager_module_time_to_ready_seconds": {"module"},
	}
	tests := []struct {
		name, query string
		problems    int
	}{
		{"fine", `max by (rollout, module) (lifecycle_manager_rollout_halted{channel="regular"}) == 1`, 0},
		{"histogram buckets", `histogram_quantile(0.5, sum by (le) (rate(lifecycle_manager_module_time_to_ready_seconds_bucket{module=~"a|b"}[10m])))`, 0},
		{"unknown series", `lifecycle_manager_rollout_stalled == 1`, 1},
		{"unknown label matched", `lifecycle_manager_rollout_halted{kyma="a"}`, 1},
		{"unknown label grouped", `max by (rollout, kyma) (lifecycle_manager_rollout_halted)`, 1},
		{"unpaired", `max by (rollout) (lifecycle_manager_rollout_halted`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkQuery(tt.query, known); len(got) != tt.problems {
				t.Errorf("checkQuery(%q) = %v, want %d problems", tt.query, got, tt.problems)
			}
		})
	}
}
