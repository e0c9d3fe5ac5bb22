package apply_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
)

// A hostile module's content names what no module may write, whoever holds
// it, and what it does not own: every such object is refused and named,
// none of them is writable, and the module's own namespaces are only the
// sync namespace and the Namespace it creates. What it does own stays
// writable.
func TestPlanRefusesWhatTheModuleDoesNotOwn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	m.owner.SyncNamespace = m.namespace
	owners := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "owners-",
		Annotations: map[string]string{v1beta2.AdoptableByAnnotation: "someone-else"}}}
	g.Expect(runtimeClient.Create(ctx, owners)).To(Succeed())
	t.Cleanup(func() { _ = runtimeClient.Delete(context.Background(), owners) })
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "others", Namespace: m.namespace, Labels: map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: m.owner.Kyma, v1beta2.ModuleNameLabel: "second",
	}}}
	g.Expect(runtimeClient.Create(ctx, other)).To(Succeed())

	objects := m.content(t,
		`{apiVersion: v1, kind: Namespace, metadata: {name: "%[1]s-own"}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: mine, namespace: "%[1]s-own"}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: "%[1]s"}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: others, namespace: "%[1]s"}}`,
		`{apiVersion: v1, kind: Namespace, metadata: {name: kube-system}}`,
		`{apiVersion: apps/v1, kind: Deployment, metadata: {name: proxy, namespace: kube-system}, spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}}`,
		`{apiVersion: v1, kind: Namespace, metadata: {name: `+owners.Name+`}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: planted, namespace: `+owners.Name+`}}`,
		`{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: kymas.operator.kyma-project.io}, spec: {group: operator.kyma-project.io, scope: Namespaced, names: {kind: Kyma, plural: kymas}, versions: []}}`,
		`{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: "samples.%[2]s"}, spec: {group: "%[2]s", scope: Namespaced, names: {kind: Sample, plural: samples}, versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: planted, namespace: identities}}`,
		`{apiVersion: v1, kind: Pod, metadata: {name: thief, namespace: "%[1]s"}, spec: {serviceAccountName: runtime-watcher, containers: [{name: c, image: i}]}}`,
		`{apiVersion: batch/v1, kind: CronJob, metadata: {name: thief, namespace: "%[1]s"}, spec: {schedule: "* * * * *", jobTemplate: {spec: {template: {spec: {serviceAccount: runtime-watcher, containers: [{name: c, image: i}]}}}}}}`,
	)
	plan, err := apply.PlanModule(ctx, runtimeClient, objects, m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	plan.Refuse(apply.Limits{
		OwnNamespacesOnly:  true,
		ReservedNamespaces: []string{"identities"},
		ReservedServiceAccount: func(namespace, name string) bool {
			return namespace == m.namespace && name == "runtime-watcher"
		},
	})

	g.Expect(plan.Conflicts()).To(ConsistOf(
		apply.Conflict{Object: "ConfigMap " + m.namespace + "/others", Holder: "module second's"},
		apply.Conflict{Object: "Deployment kube-system/proxy", Holder: "in namespace kube-system, which the module did not create"},
		apply.Conflict{Object: "ConfigMap " + owners.Name + "/planted", Holder: "in namespace " + owners.Name + ", which the module did not create"},
		apply.Conflict{Object: "CustomResourceDefinition kymas.operator.kyma-project.io", Holder: "a CRD of lifecycle-manager's own API"},
		apply.Conflict{Object: "ConfigMap identities/planted", Holder: "in the namespace of lifecycle-manager's identities"},
		apply.Conflict{Object: "Pod " + m.namespace + "/thief", Holder: "its Pods would run as ServiceAccount runtime-watcher, an identity of lifecycle-manager's"},
		apply.Conflict{Object: "CronJob " + m.namespace + "/thief", Holder: "its Pods would run as ServiceAccount runtime-watcher, an identity of lifecycle-manager's"},
	))
	g.Expect(plan.OwnNamespaces([]string{"identities"})).To(Equal([]string{m.namespace, m.namespace + "-own"}),
		"kube-system and the runtime owner's Namespace are named, not created: never the module's")
	var writable []string
	for _, obj := range plan.Writable() {
		writable = append(writable, obj.GetKind()+" "+obj.GetName())
	}
	g.Expect(writable).To(ConsistOf("Namespace "+m.namespace+"-own", "ConfigMap mine", "ConfigMap settings", "CustomResourceDefinition samples."+m.group),
		"a module's own CRD is writable, whatever its group")

	_, err = applier().ApplyPlan(ctx, plan)
	conflict := &apply.ConflictError{}
	g.Expect(err).To(BeAssignableToTypeOf(conflict))
	got := &corev1.ConfigMap{}
	g.Expect(runtimeClient.Get(ctx, client.ObjectKeyFromObject(other), got)).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(other.ResourceVersion), "nothing applied")
}

// OperatorCRDs names every CRD the operator ships, so that none of them can
// be a module's.
func TestOperatorCRDsAreAllOfTheOperatorsCRDs(t *testing.T) {
	g := NewWithT(t)
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	var names []string
	for _, file := range files {
		raw, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(yaml.Unmarshal(raw, crd)).To(Succeed())
		names = append(names, crd.Name)
	}
	g.Expect(apply.OperatorCRDs).To(ConsistOf(names))
}
