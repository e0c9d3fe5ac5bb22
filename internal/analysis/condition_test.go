package analysis

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/rollout"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/shard"
)

// create creates obj and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Expect(env.client.Create(context.Background(), obj)).To(Succeed())
	t.Cleanup(func() { _ = env.client.Delete(context.Background(), obj) })
}

// register gives a Kyma a runtime: a kubeconfig Secret that points back at
// the test's control plane.
func register(t *testing.T, kymaName string) {
	t.Helper()
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kymaName + "-kubeconfig", Namespace: namespace, Labels: map[string]string{v1beta2.KymaNameLabel: kymaName}},
		Data:       map[string][]byte{remote.KubeconfigKey: env.kcp.Kubeconfig()},
	})
}

// sample is the module's custom resource in a runtime; without namespace
// it names none, and the Manifest's sync namespace is where it is.
func sample(name, namespace string) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("analysis.test.example/v1")
	cr.SetKind("Sample")
	cr.SetName(name)
	cr.SetNamespace(namespace)
	return cr
}

// manifest creates the Kyma's Manifest of module with resource as its
// spec.resource, and sync namespace syncNS (empty: the operator's).
func manifest(t *testing.T, kymaName, module, syncNS string, resource *unstructured.Unstructured) {
	t.Helper()
	create(t, &v1beta2.Manifest{
		ObjectMeta: metav1.ObjectMeta{
			Name: kyma.ManifestName(kymaName, module), Namespace: namespace,
			Labels: map[string]string{v1beta2.KymaNameLabel: kymaName, v1beta2.ModuleNameLabel: module},
		},
		Spec: v1beta2.ManifestSpec{Remote: true, ModuleName: module, SyncNamespace: syncNS, Resource: resource},
	})
}

// inRuntime creates the custom resource in the runtime with conditions;
// observed, when not zero, is every condition's observedGeneration.
func inRuntime(t *testing.T, cr *unstructured.Unstructured, observed int64, conditions ...metav1.Condition) {
	t.Helper()
	obj := cr.DeepCopy()
	var list []any
	for _, c := range conditions {
		entry := map[string]any{"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": "", "lastTransitionTime": "2026-12-01T12:00:00Z"}
		if observed != 0 {
			entry["observedGeneration"] = observed
		}
		list = append(list, entry)
	}
	if list != nil {
		obj.Object["status"] = map[string]any{"conditions": list}
	}
	create(t, obj)
}

func healthy(status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: "Healthy", Status: status, Reason: reason}
}

// The condition of the module's custom resource, read in each runtime:
// the wanted status passes; another status, a missing condition, a missing
// resource or a module without one fails; a condition written for an older
// generation, a runtime that cannot be reached and a Manifest that cannot
// be read are inconclusive.
func TestAnalysisConditionOfTheModulesResource(t *testing.T) {
	g := NewWithT(t)
	const module = "crate"
	cases := []struct {
		kyma  string
		setup func(t *testing.T, kymaName string)
		want  rollout.AnalysisOutcome
	}{
		{kyma: "cond-true", setup: func(t *testing.T, k string) {
			register(t, k)
			manifest(t, k, module, "", sample(k, ""))
			inRuntime(t, sample(k, syncNamespace), 0, healthy(metav1.ConditionTrue, "Fine"))
		}},
		{kyma: "cond-own-sync-namespace", setup: func(t *testing.T, k string) {
			register(t, k)
			manifest(t, k, module, namespace, sample(k, ""))
			inRuntime(t, sample(k, namespace), 1, healthy(metav1.ConditionTrue, "Fine"))
		}},
		{kyma: "cond-false", setup: func(t *testing.T, k string) {
			register(t, k)
			manifest(t, k, module, "", sample(k, syncNamespace))
			inRuntime(t, sample(k, syncNamespace), 0, healthy(metav1.ConditionFalse, "Degraded"))
		}, want: rollout.AnalysisOutcome{Failed: "healthy: condition Healthy of Sample kyma-system/cond-false is False (Degraded), not True"}},
		{kyma: "cond-absent", setup: func(t *testing.T, k string) {
			register(t, k)
			manifest(t, k, module, "", sample(k, ""))
			inRuntime(t, sample(k, syncNamespace), 0, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Fine"})
		}, want: rollout.AnalysisOutcome{Failed: "healthy: Sample kyma-system/cond-absent has no condition Healthy"}},
		{kyma: "cond-no-resource", setup: func(t *testing.T, k string) {
			register(t, k)
			manifest(t, k, module, "", sample(k, ""))
		}, want: rollout.AnalysisOutcome{Failed: "healthy: Sample kyma-system/cond-no-resource does not exist"}},
		{kyma: "cond-module-without-resource", setup: func(t *testing.T, k string) {
			register(t, k)
			manifest(t, k, module, "", nil)
		}, want: rollout.AnalysisOutcome{Failed: "healthy: module crate has no custom resource (its Manifest has no spec.resource) to read condition Healthy of"}},
		{kyma: "cond-stale", setup: func(t *testing.T, k string) {
			register(t, k)
			manifest(t, k, module, "", sample(k, ""))
			// The conditions describe generation 1; a change of the
			// spec makes the resource's generation 2.
			cr := sample(k, syncNamespace)
			inRuntime(t, cr, 1, healthy(metav1.ConditionTrue, "Fine"))
			NewWithT(t).Expect(env.client.Patch(context.Background(), cr, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		}, want: rollout.AnalysisOutcome{Inconclusive: "healthy: condition Healthy of Sample kyma-system/cond-stale describes generation 1, the resource is at 2"}},
		{kyma: "cond-no-runtime", setup: func(t *testing.T, k string) {
			manifest(t, k, module, "", sample(k, ""))
		}, want: rollout.AnalysisOutcome{Inconclusive: "healthy: reaching the runtime: no kubeconfig Secret for the runtime: create a Secret in namespace analysis labelled operator.kyma-project.io/kyma-name=cond-no-runtime with the kubeconfig under key \"config\""}},
		{kyma: "cond-no-manifest", setup: func(*testing.T, string) {}, want: rollout.AnalysisOutcome{Inconclusive: `healthy: reading Manifest cond-no-manifest-crate: manifests.operator.kyma-project.io "cond-no-manifest-crate" not found`}},
	}
	var kymas []string
	want := map[string]rollout.AnalysisOutcome{}
	for _, tc := range cases {
		tc.setup(t, tc.kyma)
		kymas = append(kymas, tc.kyma)
		want[tc.kyma] = tc.want
	}
	a := newAnalyzer(g, Options{})
	ro := rolloutOf(module, v1beta2.RolloutAnalysis{Name: "healthy", Condition: &v1beta2.ConditionAnalysis{Type: "Healthy", Status: metav1.ConditionTrue}})
	got := a.Analyze(context.Background(), ro, kymas)
	for _, k := range kymas {
		g.Expect(got[k]).To(Equal(want[k]), k)
	}
	g.Expect(got).To(HaveLen(len(kymas)))

	// Another wanted status turns the verdicts round.
	ro.Spec.Analysis[0].Condition.Status = metav1.ConditionFalse
	got = a.Analyze(context.Background(), ro, []string{"cond-true", "cond-false"})
	g.Expect(got).To(Equal(map[string]rollout.AnalysisOutcome{
		"cond-true":  {Failed: "healthy: condition Healthy of Sample kyma-system/cond-true is True (Fine), not False"},
		"cond-false": {},
	}))
}

// A runtime's outcome joins every analysis's verdict: here a condition
// that fails, and a query without a Prometheus to ask.
func TestAnalysisOutcomesJoinTheAnalyses(t *testing.T) {
	g := NewWithT(t)
	const module = "joined"
	register(t, "join-a")
	manifest(t, "join-a", module, "", sample("join-a", ""))
	inRuntime(t, sample("join-a", syncNamespace), 0, healthy(metav1.ConditionFalse, "Degraded"), metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Degraded"})
	a := newAnalyzer(g, Options{})
	ro := rolloutOf(module,
		v1beta2.RolloutAnalysis{Name: "healthy", Condition: &v1beta2.ConditionAnalysis{Type: "Healthy"}},
		promAnalysis("error-rate", `analysis_error_ratio{runtime="{runtime}"}`, "0.05", ""),
		v1beta2.RolloutAnalysis{Name: "ready", Condition: &v1beta2.ConditionAnalysis{Type: "Ready"}},
	)
	g.Expect(a.Analyze(context.Background(), ro, []string{"join-a"})).To(Equal(map[string]rollout.AnalysisOutcome{"join-a": {
		Failed: "healthy: condition Healthy of Sample kyma-system/join-a is False (Degraded), not True; " +
			"ready: condition Ready of Sample kyma-system/join-a is False (Degraded), not True",
		Inconclusive: "error-rate: " + noPrometheus,
	}}))
}

// The planner of a sharded operator runs in shard 0, whose cache holds
// the kubeconfig Secrets of its own shard only. The operator's runtime
// clients read the Secret of another shard's runtime past that cache, so
// the planner's analyses reach every runtime.
func TestAnalysisConditionOfARuntimeOfAnotherShard(t *testing.T) {
	g := NewWithT(t)
	const module = "sharded"
	zero := shard.Shard{Count: 2, ID: 0}
	var k string
	for i := 0; k == ""; i++ {
		if name := fmt.Sprintf("shard-one-%d", i); shard.Of(name, zero.Count) == 1 {
			k = name
		}
	}
	register(t, k)
	manifest(t, k, module, "", sample(k, ""))
	inRuntime(t, sample(k, syncNamespace), 0, healthy(metav1.ConditionTrue, "Fine"))

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	shardCache, err := zero.NewCache(cache.New)(env.kcp.Config(), cache.Options{Scheme: env.scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = shardCache.Start(ctx) }()
	g.Expect(shardCache.WaitForCacheSync(ctx)).To(BeTrue())
	secrets := &corev1.SecretList{}
	g.Expect(shardCache.List(ctx, secrets, client.InNamespace(namespace), client.MatchingLabels{v1beta2.KymaNameLabel: k})).To(Succeed())
	g.Expect(secrets.Items).To(BeEmpty(), "shard 0's cache hides the Secret of a runtime of shard 1")

	runtimes := remote.NewCache(shardCache, env.client, remote.Options{Scheme: env.scheme, Namespace: namespace})
	a, err := New(Options{}, Fleet{Manifests: env.client, Runtimes: runtimes, Namespace: namespace, SyncNamespace: syncNamespace})
	g.Expect(err).NotTo(HaveOccurred())
	ro := rolloutOf(module, v1beta2.RolloutAnalysis{Name: "healthy", Condition: &v1beta2.ConditionAnalysis{Type: "Healthy"}})
	g.Expect(a.Analyze(ctx, ro, []string{k})).To(Equal(map[string]rollout.AnalysisOutcome{k: {}}))
}
