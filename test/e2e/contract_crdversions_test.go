package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/manifest"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

const (
	gizmoGroup    = "crdversions.e2e.example"
	gizmoCRDName  = "gizmos." + gizmoGroup
	usersGizmoNS  = "crd-users"
	usersGizmo    = "users-gizmo"
	migratingText = "Migrating %d stored objects of CRD " + gizmoCRDName + " from version v1alpha1 to v1: %d of %d rewritten"
)

// gizmoCRDYAML is the module's CRD with versions, the first the storage
// version, and conversion (None when empty).
func gizmoCRDYAML(conversion string, versions ...string) []byte {
	var vs []string
	for i, v := range versions {
		vs = append(vs, fmt.Sprintf(`
    - name: %s
      served: true
      storage: %t
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true`, v, i == 0))
	}
	if conversion == "" {
		conversion = "{strategy: None}"
	}
	return fmt.Appendf(nil, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s
spec:
  group: %[2]s
  names: {kind: Gizmo, listKind: GizmoList, plural: gizmos, singular: gizmo}
  scope: Namespaced
  conversion: %[3]s
  versions:%[4]s
`, gizmoCRDName, gizmoGroup, conversion, strings.Join(vs, ""))
}

// gizmoModule is a module version: its CRD, its ConfigMap (which tells
// the version installed) and a Gizmo of its own, at apiVersion.
func gizmoModule(name, version, apiVersion string, crd []byte) ociartifact.Module {
	shipped := fmt.Sprintf("apiVersion: %s/%s\nkind: Gizmo\nmetadata:\n  name: shipped\nspec:\n  size: 1\n", gizmoGroup, apiVersion)
	return ociartifact.Module{CRDs: crd, RawManifest: []byte(string(goodManifest(name, version)) + "---\n" + shipped)}
}

func gizmoAt(version, namespace, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: gizmoGroup, Version: version, Kind: "Gizmo"})
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

// installGizmos installs version 1.0.0 of a module whose CRD stores
// v1alpha1 and also serves v1, and has the runtime owner create extra+1
// Gizmos at v1alpha1 in a namespace of theirs; the module's own Gizmo is
// stored at v1alpha1 too.
func installGizmos(t *testing.T, name string, extra int) *testKyma {
	t.Helper()
	return installGizmosServing(t, name, extra, "v1alpha1", "v1")
}

// installGizmosServing is installGizmos with a CRD of the given versions,
// the first stored.
func installGizmosServing(t *testing.T, name string, extra int, versions ...string) *testKyma {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	publish(t, env.registry, name, "1.0.0", gizmoModule(name, "1.0.0", "v1alpha1", gizmoCRDYAML("", versions...)))
	newReleaseMeta(t, name, map[string]string{"regular": "1.0.0"})
	k := newKyma(t, module(name))
	k.eventuallyReady(t)

	rc := k.runtime.client
	g.Expect(client.IgnoreAlreadyExists(rc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: usersGizmoNS}}))).To(Succeed())
	// The runtime owner's Gizmos block the removal of the module's CRD:
	// they go first (cleanups run last in, first out).
	t.Cleanup(func() {
		for _, version := range []string{"v1", "v1alpha1"} { // whichever is served in the end
			_ = rc.DeleteAllOf(context.Background(), gizmoAt(version, "", ""), client.InNamespace(usersGizmoNS))
		}
	})
	users := gizmoAt("v1alpha1", usersGizmoNS, usersGizmo)
	users.SetLabels(map[string]string{"team": "users"})
	users.Object["spec"] = map[string]any{"size": int64(7), "owner": "the runtime owner"}
	g.Expect(rc.Create(ctx, users)).To(Succeed())
	for i := range extra {
		more := gizmoAt("v1alpha1", usersGizmoNS, fmt.Sprintf("more-%03d", i))
		more.Object["spec"] = map[string]any{"size": int64(i)}
		g.Eventually(func() error { return client.IgnoreAlreadyExists(rc.Create(ctx, more)) }, timeout, interval).Should(Succeed())
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: gizmoCRDName}, crd)).To(Succeed())
	g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1alpha1"}))
	return k
}

// readyMessages records the messages of a Manifest's Ready condition as
// its watch delivers them, each once in a row; stop ends the watch and
// returns them.
func readyMessages(t *testing.T, name string) (stop func() []string) {
	t.Helper()
	g := NewWithT(t)
	wc, err := client.NewWithWatch(env.kcp.Config(), client.Options{Scheme: env.kcpClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(context.Background(), &v1beta2.ManifestList{}, client.InNamespace(kcpNamespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	g.Expect(err).NotTo(HaveOccurred())
	var (
		mu       sync.Mutex
		messages []string
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1beta2.Manifest)
			if !ok {
				continue
			}
			ready := meta.FindStatusCondition(m.Status.Conditions, v1beta2.ConditionReady)
			if ready == nil {
				continue
			}
			mu.Lock()
			if len(messages) == 0 || messages[len(messages)-1] != ready.Message {
				messages = append(messages, ready.Message)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return messages
	}
}

// inOrder tells whether want are among seen, in this order.
func inOrder(seen []string, want ...string) bool {
	i := 0
	for _, s := range seen {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestCRDVersionDroppedMigratesStoredObjects is KLM #3483: version 2.0.0
// of a module drops v1alpha1 from its CRD, and objects are stored at
// v1alpha1: the module's own Gizmo and 261 of the runtime owner's, in a
// namespace of theirs. The operator rewrites every one at v1 (the
// Manifest says how far it is, page by page), trims storedVersions, and
// only then applies the CRD without v1alpha1, which the API server would
// refuse otherwise. Every object reads at v1 afterwards (a list fails if
// any were still stored at a version the CRD lacks), with its data, and
// the runtime owner's are not otherwise changed.
func TestCRDVersionDroppedMigratesStoredObjects(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name, extra = "crd-drop", 260
	const total = extra + 2 // the runtime owner's, and the module's own
	k := installGizmos(t, name, extra)
	rc := k.runtime.client
	usersBefore := gizmoAt("v1alpha1", usersGizmoNS, usersGizmo)
	g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(usersBefore), usersBefore)).To(Succeed())

	manifestName := kyma.ManifestName(k.name, name)
	messages := readyMessages(t, manifestName)
	publish(t, env.registry, name, "2.0.0", gizmoModule(name, "2.0.0", "v1", gizmoCRDYAML("", "v1")))
	setChannel(t, name, "regular", "2.0.0")
	expectModuleReadyAt(t, k, name, "2.0.0")

	seen := messages()
	g.Expect(inOrder(seen,
		fmt.Sprintf(migratingText, total, 0, total),
		fmt.Sprintf(migratingText, total, 250, total),
		fmt.Sprintf(migratingText, total, total, total),
		"Module is installed and ready",
	)).To(BeTrue(), "the Manifest says how far the migration is, page by page, then Ready; it said %q", seen)
	m := k.manifest(g, name)
	events, err := testenv.Events(ctx, env.kcpClient, "Manifest", m, manifest.ReasonStoredVersionsMigrated)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(events).To(ContainElement(HaveField("Note", fmt.Sprintf(
		"Migrated %d stored objects of CRD %s from version v1alpha1 to v1; removed v1alpha1 from its stored versions", total, gizmoCRDName))))

	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: gizmoCRDName}, crd)).To(Succeed())
	g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
	g.Expect(crd.Spec.Versions).To(ConsistOf(HaveField("Name", "v1")), "the old version is gone from the CRD")

	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: gizmoGroup, Version: "v1", Kind: "GizmoList"})
	g.Expect(rc.List(ctx, list)).To(Succeed(), "every object reads at v1: none is stored at v1alpha1 any more")
	g.Expect(list.Items).To(HaveLen(total))
	for _, item := range list.Items {
		if strings.HasPrefix(item.GetName(), "more-") {
			var i int64
			_, err := fmt.Sscanf(item.GetName(), "more-%03d", &i)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(item.Object["spec"]).To(Equal(map[string]any{"size": i}), item.GetName())
		}
	}
	users := gizmoAt("v1", usersGizmoNS, usersGizmo)
	g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(users), users)).To(Succeed())
	g.Expect(users.Object["spec"]).To(Equal(usersBefore.Object["spec"]))
	g.Expect(users.GetLabels()).To(Equal(map[string]string{"team": "users"}), "the runtime owner's object is not made the module's")
	g.Expect(users.GetUID()).To(Equal(usersBefore.GetUID()))
	shipped := gizmoAt("v1", v1beta2.DefaultRuntimeNamespace, "shipped")
	g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(shipped), shipped)).To(Succeed())
	g.Expect(shipped.Object["spec"]).To(Equal(map[string]any{"size": int64(1)}))
}

// TestCRDVersionMigrationThatFailsKeepsTheInstalledVersion drops v1alpha1
// in a version whose CRD converts through a webhook that does not exist:
// no object can be read at v1, so none can be migrated. The Manifest is
// Error and names the CRD, the objects and the cause; the old CRD (with
// v1alpha1 stored and served, no webhook), the objects and the installed
// version stay. A fixed version then migrates.
func TestCRDVersionMigrationThatFailsKeepsTheInstalledVersion(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "crd-drop-webhook"
	k := installGizmos(t, name, 0)
	rc := k.runtime.client

	const webhook = `{strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {service: {namespace: default, name: nowhere, path: /convert}}}}`
	publish(t, env.registry, name, "2.0.0", gizmoModule(name, "2.0.0", "v1", gizmoCRDYAML(webhook, "v1")))
	setChannel(t, name, "regular", "2.0.0")
	want := "Migrating the stored objects of CRD " + gizmoCRDName + " from version v1alpha1 to v1 failed at Gizmo " +
		usersGizmoNS + "/" + usersGizmo + " (and 1 more): server error. The CRD keeps version v1alpha1, the module stays at its installed version and nothing of the new one is applied; retrying with backoff."
	g.Eventually(func(g Gomega) {
		m := k.manifest(g, name)
		ready := condition(m, v1beta2.ConditionReady)
		g.Expect(ready.Reason).To(Equal(manifest.ReasonStorageMigrationFailed))
		g.Expect(ready.Message).To(HavePrefix(want))
		g.Expect(m.Status.State).To(Equal(v1beta2.StateError))
		g.Expect(k.moduleStatus(g, name).State).To(Equal(v1beta2.StateError))
		g.Expect(manifestWarnings(g, kyma.ManifestName(k.name, name))).To(ContainElement(ContainSubstring(`service "nowhere" not found`)))
	}, timeout, interval).Should(Succeed())

	// The old CRD: v1alpha1 stays served and stored whatever the retries
	// do; between them, the CRD is put back as it was.
	g.Eventually(func(g Gomega) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(rc.Get(ctx, client.ObjectKey{Name: gizmoCRDName}, crd)).To(Succeed())
		g.Expect(crd.Status.StoredVersions).To(ContainElement("v1alpha1"))
		g.Expect(crd.Spec.Versions).To(ConsistOf(
			And(HaveField("Name", "v1alpha1"), HaveField("Storage", true), HaveField("Served", true)),
			And(HaveField("Name", "v1"), HaveField("Storage", false)),
		))
		g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter))
	}, timeout, interval).Should(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(k.inRuntime(cm, name+"-config")).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("version", "1.0.0"), "nothing of 2.0.0 is applied")
	users := gizmoAt("v1alpha1", usersGizmoNS, usersGizmo)
	g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(users), users)).To(Succeed())
	g.Expect(users.Object["spec"]).To(HaveKeyWithValue("owner", "the runtime owner"))
	shipped := gizmoAt("v1alpha1", v1beta2.DefaultRuntimeNamespace, "shipped")
	g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(shipped), shipped)).To(Succeed())

	// A version without the webhook migrates.
	publish(t, env.registry, name, "2.0.1", gizmoModule(name, "2.0.1", "v1", gizmoCRDYAML("", "v1")))
	setChannel(t, name, "regular", "2.0.1")
	expectModuleReadyAt(t, k, name, "2.0.1")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: gizmoCRDName}, crd)).To(Succeed())
	g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
	users = gizmoAt("v1", usersGizmoNS, usersGizmo)
	g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(users), users)).To(Succeed())
	g.Expect(users.Object["spec"]).To(HaveKeyWithValue("owner", "the runtime owner"))
	g.Expect(crd.Spec.Versions).To(ConsistOf(HaveField("Name", "v1")))
}

// TestCRDVersionReplacedInOneStep has a module whose 1.0.0 CRD serves
// only v1alpha1 and whose 2.0.0 CRD serves only v1: the new storage
// version exists nowhere before the migration, which must find it served
// (the bridge CRD has both) and read every object at it.
func TestCRDVersionReplacedInOneStep(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const name = "crd-replace"
	k := installGizmosServing(t, name, 0, "v1alpha1")
	rc := k.runtime.client

	messages := readyMessages(t, kyma.ManifestName(k.name, name))
	publish(t, env.registry, name, "2.0.0", gizmoModule(name, "2.0.0", "v1", gizmoCRDYAML("", "v1")))
	setChannel(t, name, "regular", "2.0.0")
	expectModuleReadyAt(t, k, name, "2.0.0")
	seen := messages()
	g.Expect(inOrder(seen, fmt.Sprintf(migratingText, 2, 0, 2), fmt.Sprintf(migratingText, 2, 2, 2), "Module is installed and ready")).
		To(BeTrue(), "it said %q", seen)

	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(rc.Get(ctx, client.ObjectKey{Name: gizmoCRDName}, crd)).To(Succeed())
	g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
	g.Expect(crd.Spec.Versions).To(ConsistOf(HaveField("Name", "v1")))
	users := gizmoAt("v1", usersGizmoNS, usersGizmo)
	g.Expect(rc.Get(ctx, client.ObjectKeyFromObject(users), users)).To(Succeed())
	g.Expect(users.Object["spec"]).To(HaveKeyWithValue("owner", "the runtime owner"))
	g.Expect(users.GetLabels()).To(Equal(map[string]string{"team": "users"}))
}
