package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
)

// The contract with a module's default custom resource (docs/modules.md,
// "The contract with your module"; issue 32, KLM #3484, #3489, #3468): a
// new version that renames it, and a runtime owner who deletes, replaces or
// copies it. The module is template-operator-like (manifest_status_test.go),
// declares RBAC (so it is written as its own identity), and its operator
// runs in the test: it puts a finalizer on every TemplateSample, reports it
// Ready, and removes the finalizer when one is deleted. Where a step must be
// seen while an old custom resource is being finalized, the test holds it
// with a finalizer of its own, as a slow operator would.

// holdFinalizer is the test's own finalizer: a custom resource that carries
// it stays in deletion until the test releases it.
const holdFinalizer = "e2e.lifecycle-manager/hold"

// publishWithDefault pushes version of the module with its default custom
// resource named defaultName, and creates its template; the module declares
// the RBAC its operator needs.
func (m templateOperator) publishWithDefault(t *testing.T, version, defaultName string) {
	t.Helper()
	g := NewWithT(t)
	content := ociartifact.Module{CRDs: []byte(m.crdYAML()), RawManifest: []byte(m.manifestYAML())}
	artifact, err := ociartifact.Push(context.Background(), fmt.Sprintf("%s/modules/%s:%s", env.registry.Host(), m.name, version), content.Layers(), ociartifact.Insecure())
	g.Expect(err).NotTo(HaveOccurred())
	defaultCR := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"resourceFilePath": "./module-data/" + version}}}
	defaultCR.SetGroupVersionKind(m.kind())
	defaultCR.SetName(defaultName)
	template := samplemodules.Version{Module: m.name, Version: version, DefaultCR: defaultCR}.Template(kcpNamespace, artifact.Links)
	template.Spec.Manager = &v1beta2.Manager{
		GroupVersionKind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Namespace:        m.namespace, Name: "manager",
	}
	template.Spec.RBAC = &v1beta2.ModuleRBAC{ClusterRules: []rbacv1.PolicyRule{{
		APIGroups: []string{m.group},
		Resources: []string{"templatesamples", "templatesamples/status", "templatesamples/finalizers"},
		Verbs:     []string{"get", "list", "watch", "update", "patch"},
	}}}
	g.Expect(env.kcpClient.Create(context.Background(), template)).To(Succeed())
	t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), template) })
}

// defaultResource is how the Manifest's status records a TemplateSample of
// the runtime's sync namespace.
func (m templateOperator) defaultResource(name string) v1beta2.Resource {
	gvk := m.kind()
	return v1beta2.Resource{
		GroupVersionKind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Namespace:        v1beta2.DefaultRuntimeNamespace, Name: name,
	}
}

// sample reads a TemplateSample of the runtime's sync namespace.
func (m templateOperator) sample(g Gomega, k *testKyma, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(m.kind())
	err := k.runtime.client.Get(context.Background(), client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	return u, err
}

// ownersSample is a TemplateSample the runtime owner writes, without the
// module's labels unless labels says otherwise.
func (m templateOperator) ownersSample(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"owner": "runtime-owner"}}}
	u.SetGroupVersionKind(m.kind())
	u.SetNamespace(v1beta2.DefaultRuntimeNamespace)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// deleteSample deletes a TemplateSample as the runtime owner.
func (m templateOperator) deleteSample(t *testing.T, k *testKyma, name string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(client.IgnoreNotFound(k.runtime.client.Delete(context.Background(), m.ownersSample(name, nil)))).To(Succeed())
}

// hold puts the test's finalizer on a TemplateSample, and releases it at
// the end of the test at the latest, before the Kyma is deleted.
func (m templateOperator) hold(t *testing.T, k *testKyma, name string) {
	t.Helper()
	m.setHold(t, k, name, true)
	t.Cleanup(func() { m.setHold(t, k, name, false) })
}

// release removes the test's finalizer from a TemplateSample.
func (m templateOperator) release(t *testing.T, k *testKyma, name string) {
	t.Helper()
	m.setHold(t, k, name, false)
}

func (m templateOperator) setHold(t *testing.T, k *testKyma, name string, hold bool) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		u, err := m.sample(g, k, name)
		if apierrors.IsNotFound(err) && !hold {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		changed := controllerutil.RemoveFinalizer(u, holdFinalizer)
		if hold {
			changed = controllerutil.AddFinalizer(u, holdFinalizer)
		}
		if changed {
			g.Expect(k.runtime.client.Update(context.Background(), u)).To(Succeed())
		}
	}, timeout, interval).Should(Succeed())
}

// expectModuleSays waits until the module's Manifest is in state with a
// Ready condition saying message, and the Kyma's entry for it agrees.
func (k *testKyma) expectModuleSays(t *testing.T, moduleName string, state v1beta2.State, message string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		m := k.manifest(g, moduleName)
		g.Expect(m.Status.State).To(Equal(state), "Manifest status: %+v", m.Status.Conditions)
		g.Expect(condition(m, v1beta2.ConditionReady).Message).To(Equal(message))
		entry := k.moduleStatus(g, moduleName)
		g.Expect(entry.State).To(Equal(state))
		if state != v1beta2.StateReady {
			g.Expect(entry.Message).To(ContainSubstring(message))
		}
	}, timeout, interval).Should(Succeed())
}

// moduleReady is the Manifest's message of a module that is Ready.
const moduleReady = "Module is installed and ready"

// observeStates records every state the module's Manifest and the Kyma
// (its own and the module's entry) are written with, through watches: a
// poll would miss a state that lasts a few hundred milliseconds. The
// returned function stops the watches and returns what they saw.
func observeStates(t *testing.T, k *testKyma, moduleName string) func() []string {
	t.Helper()
	g := NewWithT(t)
	wc, err := client.NewWithWatch(env.kcp.Config(), client.Options{Scheme: env.kcpClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	manifests, err := wc.Watch(ctx, &v1beta2.ManifestList{}, client.InNamespace(kcpNamespace),
		client.MatchingFields{"metadata.name": kyma.ManifestName(k.name, moduleName)})
	g.Expect(err).NotTo(HaveOccurred())
	kymas, err := wc.Watch(ctx, &v1beta2.KymaList{}, client.InNamespace(kcpNamespace),
		client.MatchingFields{"metadata.name": k.name})
	g.Expect(err).NotTo(HaveOccurred())
	var (
		mu   sync.Mutex
		seen []string
		wg   sync.WaitGroup
	)
	add := func(s string) {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
	}
	wg.Go(func() {
		for ev := range manifests.ResultChan() {
			if m, ok := ev.Object.(*v1beta2.Manifest); ok {
				add(fmt.Sprintf("Manifest %s: %s", m.Status.State, condition(m, v1beta2.ConditionReady).Message))
			}
		}
	})
	wg.Go(func() {
		for ev := range kymas.ResultChan() {
			if kc, ok := ev.Object.(*v1beta2.Kyma); ok {
				add(fmt.Sprintf("Kyma %s", kc.Status.State))
				for _, entry := range kc.Status.Modules {
					if entry.Name == moduleName {
						add(fmt.Sprintf("Kyma module %s: %s", entry.State, entry.Message))
					}
				}
			}
		}
	})
	stop := func() []string {
		cancel()
		manifests.Stop()
		kymas.Stop()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	t.Cleanup(func() { stop() })
	return stop
}

// expectNoError checks the states observeStates saw: never Error.
func expectNoError(g Gomega, seen []string) {
	g.Expect(seen).NotTo(BeEmpty())
	for _, s := range seen {
		g.Expect(s).NotTo(MatchRegexp(`^(Manifest|Kyma|Kyma module) Error\b`), "states seen: %v", seen)
	}
}

// installRenaming publishes versions 1.0.0 (default custom resource
// "first") and 2.0.0 ("second") of a module, installs 1.0.0 on a new Kyma
// and waits until it is Ready with "first" recorded as its default custom
// resource.
func installRenaming(t *testing.T, name string, policy v1beta2.CustomResourcePolicy) (*testKyma, templateOperator) {
	t.Helper()
	g := NewWithT(t)
	m := newTemplateOperator(name)
	m.publishWithDefault(t, "1.0.0", "first")
	m.publishWithDefault(t, "2.0.0", "second")
	newReleaseMeta(t, m.name, map[string]string{"regular": "1.0.0"})
	entry := module(m.name)
	entry.CustomResourcePolicy = policy
	k := newKymaFor(t, m, entry)
	k.eventuallyModuleReady(t, m.name)
	if policy == v1beta2.CustomResourcePolicyCreateAndDelete {
		g.Eventually(func(g Gomega) {
			g.Expect(k.manifest(g, m.name).Status.DefaultResources).To(ConsistOf(m.defaultResource("first")))
		}, timeout, interval).Should(Succeed())
	}
	return k, m
}

// replacingMessage is what the Manifest says while the earlier default
// custom resources are being finalized.
func replacingMessage(names ...string) string {
	msg := "Waiting for the module's operator to finalize the module's earlier default custom resource, which its version no longer names: "
	for i, n := range names {
		if i > 0 {
			msg += ", "
		}
		msg += "TemplateSample " + v1beta2.DefaultRuntimeNamespace + "/" + n
	}
	return msg
}

// TestContractDefaultCRRenamedOnUpgrade upgrades a module whose new version
// names another default custom resource (KLM #3484): the new one is
// created, then the old one is deleted; while its operator finalizes it the
// module is Processing and says so, naming it; once it is gone the module is
// Ready with only the new one recorded. Removing the module then leaves
// nothing, and no state on the way is Error.
func TestContractDefaultCRRenamedOnUpgrade(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k, m := installRenaming(t, "dcr-rename", v1beta2.CustomResourcePolicyCreateAndDelete)
	first, err := m.sample(g, k, "first")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.GetLabels()).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, m.name))
	m.hold(t, k, "first")
	seen := observeStates(t, k, m.name)

	setChannel(t, m.name, "regular", "2.0.0")
	k.expectModuleSays(t, m.name, v1beta2.StateProcessing, replacingMessage("first"))
	g.Eventually(func(g Gomega) {
		manifest := k.manifest(g, m.name)
		g.Expect(manifest.Spec.Version).To(Equal("2.0.0"))
		g.Expect(manifest.Status.DefaultResources).To(ConsistOf(m.defaultResource("first"), m.defaultResource("second")),
			"the old one stays recorded, the module's, until it is gone")
		second, err := m.sample(g, k, "second")
		g.Expect(err).NotTo(HaveOccurred(), "the new one exists before the old one goes")
		g.Expect(second.GetLabels()).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, m.name))
		old, err := m.sample(g, k, "first")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(old.GetDeletionTimestamp()).NotTo(BeNil(), "the old one is being deleted")
	}, timeout, interval).Should(Succeed())

	m.release(t, k, "first")
	k.expectModuleSays(t, m.name, v1beta2.StateReady, moduleReady)
	g.Eventually(func(g Gomega) {
		g.Expect(k.manifest(g, m.name).Status.DefaultResources).To(ConsistOf(m.defaultResource("second")))
		_, err := m.sample(g, k, "first")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the old default custom resource is gone")
	}, timeout, interval).Should(Succeed())
	g.Expect(normalEvents(g, "Manifest", kyma.ManifestName(k.name, m.name), "", "CustomResourceReplaced")).To(ContainElement(
		HaveField("Note", "Deleting TemplateSample kyma-system/first: the module's version 2.0.0 names TemplateSample kyma-system/second as its default custom resource")))

	start := time.Now()
	k.withModules(t)
	expectRemoved(t, k, m, start)
	expectNoError(g, seen())
}

// TestContractDefaultCRRenamedThenRemoved removes a module while the
// default custom resource of its previous version is still being finalized,
// with a copy of the current one that kept the module's labels (made with
// kubectl get -o yaml | kubectl create): every one of them is deleted, the
// removal waits only for the one its operator has not finalized yet, names
// it, and finishes once it is gone. It is never stuck.
func TestContractDefaultCRRenamedThenRemoved(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k, m := installRenaming(t, "dcr-rename-removed", v1beta2.CustomResourcePolicyCreateAndDelete)
	m.hold(t, k, "first")
	seen := observeStates(t, k, m.name)
	setChannel(t, m.name, "regular", "2.0.0")
	k.expectModuleSays(t, m.name, v1beta2.StateProcessing, replacingMessage("first"))

	copied := m.ownersSample("copied", map[string]string{
		v1beta2.ManagedByLabel: v1beta2.ManagedByValue, v1beta2.KymaNameLabel: k.name, v1beta2.ModuleNameLabel: m.name,
	})
	g.Expect(k.runtime.client.Create(ctx, copied)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(k.runtime.client.Delete(context.Background(), copied)) })

	k.withModules(t)
	k.expectModuleSays(t, m.name, v1beta2.StateDeleting,
		"Waiting for the module's operator to finalize 1 of the module's custom resources: TemplateSample kyma-system/first")
	for _, name := range []string{"second", "copied"} {
		_, err := m.sample(g, k, name)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s, the module's by its labels, is deleted with it", name)
	}

	m.release(t, k, "first")
	expectRemoved(t, k, m, time.Now())
	expectNoError(g, seen())
}

// TestContractDefaultCRDeletedByOwner has the runtime owner delete the
// module's default custom resource (KLM #3489, #3468): under
// CreateAndDelete it comes back, with an event; under Ignore it does not,
// and it leaves the record. The module is never in Error on the way.
func TestContractDefaultCRDeletedByOwner(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	k, m := installRenaming(t, "dcr-deleted", v1beta2.CustomResourcePolicyCreateAndDelete)
	seen := observeStates(t, k, m.name)
	manifest := k.manifest(g, m.name)
	before, err := m.sample(g, k, "first")
	g.Expect(err).NotTo(HaveOccurred())

	// CreateAndDelete: it comes back.
	m.deleteSample(t, k, "first")
	g.Eventually(func(g Gomega) {
		again, err := m.sample(g, k, "first")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.GetUID()).NotTo(Equal(before.GetUID()), "created again")
		g.Expect(again.GetLabels()).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, m.name))
		g.Expect(normalEvents(g, "Manifest", manifest.Name, manifest.UID, "CustomResourceCreated")).To(ContainElement(
			HaveField("Note", "Created TemplateSample first again: it was missing")))
	}, timeout, interval).Should(Succeed())
	k.expectModuleSays(t, m.name, v1beta2.StateReady, moduleReady)

	// Ignore: it does not come back, and the record drops it.
	ignore := module(m.name)
	ignore.CustomResourcePolicy = v1beta2.CustomResourcePolicyIgnore
	k.withModules(t, ignore)
	g.Eventually(func(g Gomega) {
		g.Expect(k.manifest(g, m.name).Spec.CustomResourcePolicy).To(Equal(v1beta2.CustomResourcePolicyIgnore))
	}, timeout, interval).Should(Succeed())
	k.expectModuleSays(t, m.name, v1beta2.StateReady, moduleReady)
	m.deleteSample(t, k, "first")
	g.Eventually(func(g Gomega) {
		_, err := m.sample(g, k, "first")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		g.Expect(k.manifest(g, m.name).Status.DefaultResources).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		_, err := m.sample(g, k, "first")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "under Ignore the default custom resource is not created again")
	}, "3s", interval).Should(Succeed())
	k.expectModuleSays(t, m.name, v1beta2.StateReady, moduleReady)
	expectNoError(g, seen())
}

// TestContractOwnersCustomResourceUnderDefaultName has the runtime owner
// create a custom resource under the default's name before the module
// would create it, and later "rename" the module's default custom resource
// (delete it and create a copy under another name, without the module's
// labels). The owner's resources stay the owner's: never written, never
// recorded, never deleted with the module, whose removal waits for them and
// says so; the default custom resource comes back under its own name.
func TestContractOwnersCustomResourceUnderDefaultName(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k, m := installRenaming(t, "dcr-owners", v1beta2.CustomResourcePolicyIgnore)
	seen := observeStates(t, k, m.name)
	_, err := m.sample(g, k, "first")
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "under Ignore no default custom resource is created")

	// The owner's, under the default's name, before the module creates it.
	owners := m.ownersSample("first", nil)
	g.Expect(k.runtime.client.Create(ctx, owners)).To(Succeed())
	k.withModules(t, module(m.name))
	g.Eventually(func(g Gomega) {
		manifest := k.manifest(g, m.name)
		g.Expect(manifest.Spec.CustomResourcePolicy).To(Equal(v1beta2.CustomResourcePolicyCreateAndDelete))
		g.Expect(manifest.Status.DefaultResources).To(BeEmpty(), "the owner's is not recorded")
	}, timeout, interval).Should(Succeed())
	k.expectModuleSays(t, m.name, v1beta2.StateReady, moduleReady)
	live, err := m.sample(g, k, "first")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live.GetUID()).To(Equal(owners.GetUID()))
	g.Expect(live.GetLabels()).NotTo(HaveKey(v1beta2.ModuleNameLabel), "never written by the module")
	g.Expect(live.Object["spec"]).To(Equal(owners.Object["spec"]))

	// The owner deletes it: the module's own takes its place.
	m.deleteSample(t, k, "first")
	g.Eventually(func(g Gomega) {
		created, err := m.sample(g, k, "first")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(created.GetLabels()).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, m.name))
		g.Expect(k.manifest(g, m.name).Status.DefaultResources).To(ConsistOf(m.defaultResource("first")))
	}, timeout, interval).Should(Succeed())
	k.expectModuleSays(t, m.name, v1beta2.StateReady, moduleReady)

	// The owner "renames" it: deletes it, creates a copy under another name
	// without the module's labels. The default comes back; the copy is the
	// owner's.
	renamed := m.ownersSample("renamed", nil)
	g.Expect(k.runtime.client.Create(ctx, renamed)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(k.runtime.client.Delete(context.Background(), renamed)) })
	before, err := m.sample(g, k, "first")
	g.Expect(err).NotTo(HaveOccurred())
	m.deleteSample(t, k, "first")
	g.Eventually(func(g Gomega) {
		again, err := m.sample(g, k, "first")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.GetUID()).NotTo(Equal(before.GetUID()))
		g.Expect(again.GetLabels()).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, m.name))
	}, timeout, interval).Should(Succeed())
	k.expectModuleSays(t, m.name, v1beta2.StateReady, moduleReady)
	g.Expect(k.manifest(g, m.name).Status.DefaultResources).To(ConsistOf(m.defaultResource("first")), "the owner's copy is not recorded")

	// Removal: the module's default goes; the owner's copy stays and
	// blocks, named, until the owner deletes it.
	k.withModules(t)
	blocked := "Waiting for 1 custom resources that are not the module's to be deleted by their owners: TemplateSample kyma-system/renamed. Removing the module would delete them with its CRDs"
	k.expectModuleSays(t, m.name, v1beta2.StateDeleting, blocked)
	g.Eventually(func(g Gomega) {
		_, err := m.sample(g, k, "first")
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the module's default custom resource is deleted with it")
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		copyLive, err := m.sample(g, k, "renamed")
		g.Expect(err).NotTo(HaveOccurred(), "the owner's copy is never deleted with the module")
		g.Expect(copyLive.GetDeletionTimestamp()).To(BeNil())
		g.Expect(copyLive.GetLabels()).NotTo(HaveKey(v1beta2.ModuleNameLabel))
	}, "3s", interval).Should(Succeed())
	k.expectModuleSays(t, m.name, v1beta2.StateDeleting, blocked)

	m.deleteSample(t, k, "renamed")
	expectRemoved(t, k, m, time.Now())
	expectNoError(g, seen())
}

// TestContractDefaultCRTakenOverByOwner has the runtime owner take the
// module's default custom resource over by removing the module's labels
// from it: the record drops it, the module keeps using it and never writes
// it, and removing the module leaves it, waiting, named, until the owner
// deletes it.
func TestContractDefaultCRTakenOverByOwner(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k, m := installRenaming(t, "dcr-taken-over", v1beta2.CustomResourcePolicyCreateAndDelete)
	seen := observeStates(t, k, m.name)

	g.Eventually(func(g Gomega) {
		first, err := m.sample(g, k, "first")
		g.Expect(err).NotTo(HaveOccurred())
		first.SetLabels(map[string]string{"team": "runtime-owner"})
		g.Expect(k.runtime.client.Update(ctx, first)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k.manifest(g, m.name).Status.DefaultResources).To(BeEmpty(), "no longer the module's: dropped from the record")
	}, timeout, interval).Should(Succeed())
	k.expectModuleSays(t, m.name, v1beta2.StateReady, moduleReady)
	first, err := m.sample(g, k, "first")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.GetLabels()).To(Equal(map[string]string{"team": "runtime-owner"}), "the module never writes it back")

	k.withModules(t)
	k.expectModuleSays(t, m.name, v1beta2.StateDeleting,
		"Waiting for 1 custom resources that are not the module's to be deleted by their owners: TemplateSample kyma-system/first. Removing the module would delete them with its CRDs")
	first, err = m.sample(g, k, "first")
	g.Expect(err).NotTo(HaveOccurred(), "the owner's is never deleted with the module")
	g.Expect(first.GetDeletionTimestamp()).To(BeNil())

	m.deleteSample(t, k, "first")
	expectRemoved(t, k, m, time.Now())
	expectNoError(g, seen())
}

// newKindRun makes the module of TestContractDefaultCRWaitsForItsNewKind,
// and so its CRD, new to the runtime each time the test runs (go test
// -count).
var newKindRun atomic.Int64

// TestContractDefaultCRWaitsForItsNewKind installs a module whose CRD is
// new to the runtime. The runtime's API server holds a create of a custom
// resource for 2 s after its CRD became Established; created at once, the
// default custom resource would hold the operator's worker and the
// runtime's slot for that long. So the reconcile that creates the CRD ends
// without creating it, saying so, and a later one creates it: it exists,
// labelled as the module's, recorded, and the module is Ready, never Error.
// Removing the module then leaves nothing.
func TestContractDefaultCRWaitsForItsNewKind(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	run := newKindRun.Add(1) // module names are letters only
	m := newTemplateOperator(fmt.Sprintf("dcr-newkind-%c%c%c", 'a'+run/676%26, 'a'+run/26%26, 'a'+run%26))
	m.publishWithDefault(t, "1.0.0", "first")
	newReleaseMeta(t, m.name, map[string]string{"regular": "1.0.0"})
	k := newKymaFor(t, m)
	seen := observeStates(t, k, m.name)

	k.withModules(t, module(m.name))
	k.eventuallyModuleReady(t, m.name)
	first, err := m.sample(g, k, "first")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.GetLabels()).To(HaveKeyWithValue(v1beta2.ModuleNameLabel, m.name))
	g.Eventually(func(g Gomega) {
		g.Expect(k.manifest(g, m.name).Status.DefaultResources).To(ConsistOf(m.defaultResource("first")))
	}, timeout, interval).Should(Succeed())
	waiting := fmt.Sprintf("Manifest Processing: Waiting for the runtime's API servers to serve the module's new kind TemplateSample.%s before creating its default custom resource", m.group)
	states := seen()
	g.Expect(states).To(ContainElement(waiting), "the reconcile that created the CRD did not create the default custom resource")
	expectNoError(g, states)

	start := time.Now()
	k.withModules(t)
	expectRemoved(t, k, m, start)
}
