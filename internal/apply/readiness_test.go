package apply_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
)

// TestManagerReadiness reads a module's manager Deployment as kstatus does,
// through the states a deployment controller would report (set here
// through the status subresource: this runtime runs no controllers).
func TestManagerReadiness(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	manager := &v1beta2.Manager{
		GroupVersionKind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Name:             "manager",
	}
	readiness := func() apply.Readiness {
		r, err := apply.ManagerReadiness(ctx, runtimeClient, manager, m.namespace)
		g.Expect(err).NotTo(HaveOccurred())
		return r
	}

	r, err := apply.ManagerReadiness(ctx, runtimeClient, nil, m.namespace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.State).To(Equal(v1beta2.StateReady), "a module without a manager is ready when applied")
	deploymentKind := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	g.Expect(readiness()).To(Equal(apply.Readiness{State: v1beta2.StateProcessing,
		Message: "Deployment " + m.namespace + "/manager does not exist yet",
		Pending: &apply.Pending{GVK: deploymentKind, Namespace: m.namespace, Name: "manager"}}), "the sync namespace is the default")

	labels := map[string]string{"app": "manager"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "manager", Namespace: m.namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "manager:1"}}},
			},
		},
	}
	g.Expect(runtimeClient.Create(ctx, deployment)).To(Succeed())
	r = readiness()
	g.Expect(r.State).To(Equal(v1beta2.StateProcessing), "a Deployment not yet rolled out is not ready")
	g.Expect(r.Pending).To(Equal(&apply.Pending{GVK: deploymentKind, Namespace: m.namespace, Name: "manager",
		ResourceVersion: deployment.ResourceVersion}), "the module waits for the Deployment as it was read")

	deployment.Status = appsv1.DeploymentStatus{
		ObservedGeneration: deployment.Generation,
		Replicas:           1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	g.Expect(runtimeClient.Status().Update(ctx, deployment)).To(Succeed())
	g.Expect(readiness()).To(Equal(apply.Readiness{State: v1beta2.StateReady}))

	deployment.Status.Conditions[1] = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
	g.Expect(runtimeClient.Status().Update(ctx, deployment)).To(Succeed())
	r = readiness()
	g.Expect(r.State).To(Equal(v1beta2.StateError), "a stalled rollout is an error")
	g.Expect(r.Message).To(ContainSubstring("Deployment " + m.namespace + "/manager"))
}

// TestCustomResourceReadiness maps the module's custom resource's
// status.state, as its operator reports it, to the module's state.
func TestCustomResourceReadiness(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	_, err := applier().ApplyModule(ctx, m.content(t, widgetCRD), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	m.widgetServed(t)
	cr := m.content(t, `{apiVersion: "%[2]s/v1", kind: Widget, metadata: {name: default, namespace: "%[1]s"}, spec: {size: 1}}`)[0]
	readiness := func() apply.Readiness {
		r, err := apply.CustomResourceReadiness(ctx, runtimeClient, cr)
		g.Expect(err).NotTo(HaveOccurred())
		return r
	}

	r, err := apply.CustomResourceReadiness(ctx, runtimeClient, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.State).To(Equal(v1beta2.StateReady), "a module without a custom resource is ready when applied")
	g.Expect(readiness().State).To(Equal(v1beta2.StateProcessing), "absent")
	g.Expect(runtimeClient.Create(ctx, cr.DeepCopy())).To(Succeed())
	g.Expect(readiness().State).To(Equal(v1beta2.StateProcessing), "no state reported yet")

	for _, state := range []v1beta2.State{v1beta2.StateReady, v1beta2.StateWarning, v1beta2.StateError, v1beta2.StateDeleting, "Installing"} {
		reported := &unstructured.Unstructured{}
		reported.SetGroupVersionKind(cr.GroupVersionKind())
		g.Expect(runtimeClient.Get(ctx, client.ObjectKeyFromObject(cr), reported)).To(Succeed())
		g.Expect(unstructured.SetNestedField(reported.Object, string(state), "status", "state")).To(Succeed())
		g.Expect(runtimeClient.Status().Update(ctx, reported)).To(Succeed())

		want := state
		if state == "Installing" {
			want = v1beta2.StateProcessing // a state the operator does not know is not Ready
		}
		r := readiness()
		g.Expect(r.State).To(Equal(want), "status.state %s", state)
		if want != v1beta2.StateReady {
			g.Expect(r.Message).To(ContainSubstring("Widget " + m.namespace + "/default"))
		}
	}
}

// TestCustomResourcesOf lists the custom resources of the module's CRDs in
// the runtime, and InInventory tells the module's own (its content ships
// them) from a user's.
func TestCustomResourcesOf(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	m := newModule(t)
	applied, err := applier().ApplyModule(ctx, m.content(t,
		widgetCRD,
		`{apiVersion: "%[2]s/v1", kind: Widget, metadata: {name: ours, namespace: "%[1]s"}}`,
		configMap("settings", "%[1]s", "1"),
	), m.owner, nil)
	g.Expect(err).NotTo(HaveOccurred())
	users := &unstructured.Unstructured{}
	users.SetAPIVersion(m.group + "/v1")
	users.SetKind("Widget")
	users.SetNamespace(m.namespace)
	users.SetName("a-users")
	g.Expect(runtimeClient.Create(ctx, users)).To(Succeed())

	found, err := apply.CustomResourcesOf(ctx, runtimeClient, applied.Inventory, m.owner)
	g.Expect(err).NotTo(HaveOccurred())
	usersEntry := resource(m.group, "Widget", m.namespace, "a-users")
	ours := resource(m.group, "Widget", m.namespace, "ours")
	g.Expect(found.Own).To(Equal([]v1beta2.Resource{ours}), "the module's custom resources carry its labels")
	g.Expect(found.Others).To(Equal([]v1beta2.Resource{usersEntry}), "a user's custom resource is not the module's")

	in, out := apply.InInventory(append(found.Others, found.Own...), applied.Inventory)
	g.Expect(in).To(Equal([]v1beta2.Resource{ours}))
	g.Expect(out).To(Equal([]v1beta2.Resource{usersEntry}))

	movedVersion := ours
	movedVersion.Version = "v2"
	in, _ = apply.InInventory([]v1beta2.Resource{movedVersion}, applied.Inventory)
	g.Expect(in).To(HaveLen(1), "an entry is the same object across API versions of its kind")

	g.Expect(apply.CustomResourcesOf(ctx, runtimeClient, applied.Inventory[2:], m.owner)).To(BeZero(), "an inventory without CRDs has none")
	g.Expect(apply.CustomResourcesOf(ctx, runtimeClient, []v1beta2.Resource{
		resource("apiextensions.k8s.io", "CustomResourceDefinition", "", "gone."+m.group),
	}, m.owner)).To(BeZero(), "a CRD that is gone has none")
}
