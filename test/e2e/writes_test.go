package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/index"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

// TestInstallWritesEachManifestOnceAndOneEvent checks what an install costs
// the control plane beyond the Manifests themselves: each Manifest is
// created already carrying its finalizer (no second write to add it), the
// Kyma gets one event for all its modules, and the Manifests none.
func TestInstallWritesEachManifestOnceAndOneEvent(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	name := kymaNameOf(t)
	modules := []string{samplemodules.Sample, samplemodules.Chart, samplemodules.Evolving}

	// Watching from before the Kyma exists, the first event of each
	// Manifest is its creation, as written.
	watching, err := client.NewWithWatch(env.kcp.Config(), client.Options{Scheme: env.kcpClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := watching.Watch(ctx, &v1beta2.ManifestList{}, client.InNamespace(kcpNamespace), client.MatchingLabels{v1beta2.KymaNameLabel: name})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	k := newKyma(t, module(samplemodules.Sample), module(samplemodules.Chart), module(samplemodules.Evolving))
	created := map[string]*v1beta2.Manifest{}
	deadline := time.After(timeout)
	for len(created) < len(modules) {
		select {
		case e, open := <-w.ResultChan():
			g.Expect(open).To(BeTrue(), "the watch of the Kyma's Manifests ended")
			m, ok := e.Object.(*v1beta2.Manifest)
			g.Expect(ok).To(BeTrue(), "watch event %s: %v", e.Type, e.Object)
			if _, seen := created[m.Name]; !seen {
				g.Expect(e.Type).To(Equal(watch.Added), "the first event of Manifest %s", m.Name)
				created[m.Name] = m
			}
		case <-deadline:
			t.Fatalf("only %d of %d Manifests were created", len(created), len(modules))
		}
	}
	for _, mod := range modules {
		m := created[kyma.ManifestName(name, mod)]
		g.Expect(m).NotTo(BeNil(), "Manifest of %s", mod)
		g.Expect(m.Finalizers).To(ContainElement(v1beta2.ManifestFinalizer), "Manifest %s is created with its finalizer", m.Name)
	}
	k.eventuallyReady(t)

	// One event on the Kyma names every module it installs.
	var moduleEvents []eventsv1.Event
	g.Eventually(func(g Gomega) {
		moduleEvents = normalEvents(g, "Kyma", name, k.get(g).UID, "Module")
		g.Expect(moduleEvents).To(ContainElement(HaveField("Note", And(
			HavePrefix("Installing 3 modules: "),
			ContainSubstring(samplemodules.Sample+" 1.0.0"),
			ContainSubstring(samplemodules.Chart+" 1.0.0"),
			ContainSubstring(samplemodules.Evolving+" 1.0.0")))))
	}, timeout, interval).Should(Succeed())
	g.Expect(moduleEvents).To(HaveLen(1), "one module event per Kyma reconcile")
	g.Expect(moduleEvents[0].Reason).To(Equal(kyma.ReasonModulesChanged))

	// The Manifests' first install is reported on the Kyma alone.
	for _, mod := range modules {
		m := created[kyma.ManifestName(name, mod)]
		g.Expect(normalEvents(g, "Manifest", m.Name, m.UID, "")).To(BeEmpty(),
			"Normal events on the Manifest of %s", mod)
	}
}

// normalEvents are the Normal events about an object whose reason starts
// with prefix, told by its UID too (testenv.Events).
func normalEvents(g Gomega, kind, name string, uid types.UID, prefix string) []eventsv1.Event {
	regarding := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: kcpNamespace, Name: name, UID: uid}}
	events, err := testenv.Events(context.Background(), env.kcpClient, kind, regarding, "")
	g.Expect(err).NotTo(HaveOccurred())
	var normal []eventsv1.Event
	for _, e := range events {
		if e.Type == corev1.EventTypeNormal && strings.HasPrefix(e.Reason, prefix) {
			normal = append(normal, e)
		}
	}
	return normal
}

// TestKymaIndexFindsOnlyTheKymasOwnObjects checks the index the operator's
// cache finds a Kyma's Manifests and kubeconfig Secret by, against objects
// of a Kyma whose name starts with the same letters. Not parallel: its
// Manifests, of a Kyma that does not exist, are no other test's business.
func TestKymaIndexFindsOnlyTheKymasOwnObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	own, other := "index-a", "index-a-b"
	remoteSpec := v1beta2.ManifestSpec{Remote: true, ModuleName: "index"}
	labelled := func(obj client.Object, kymaName string) client.Object {
		obj.SetNamespace(kcpNamespace)
		obj.SetLabels(map[string]string{v1beta2.KymaNameLabel: kymaName})
		return obj
	}
	objects := []client.Object{
		labelled(&v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "index-a-one"}, Spec: remoteSpec}, own),
		labelled(&v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "index-a-two"}, Spec: remoteSpec}, own),
		labelled(&v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: "index-a-b-one"}, Spec: remoteSpec}, other),
		labelled(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "index-a-kubeconfig"}, Data: map[string][]byte{remote.KubeconfigKey: env.kcp.Kubeconfig()}}, own),
		labelled(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "index-a-b-kubeconfig"}, Data: map[string][]byte{remote.KubeconfigKey: env.kcp.Kubeconfig()}}, other),
	}
	for _, obj := range objects {
		g.Expect(env.kcpClient.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), obj) })
	}

	// An informer cache like the manager's, with the indexes registered the
	// same way.
	c, err := cache.New(env.kcp.Config(), cache.Options{Scheme: env.kcpClient.Scheme(), DefaultNamespaces: map[string]cache.Config{kcpNamespace: {}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(index.Register(ctx, c)).To(Succeed())
	go func() { _ = c.Start(ctx) }()
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())

	g.Eventually(func(g Gomega) {
		manifests := &v1beta2.ManifestList{}
		g.Expect(c.List(ctx, manifests, client.InNamespace(kcpNamespace), index.OfKyma(own))).To(Succeed())
		g.Expect(manifests.Items).To(ConsistOf(HaveField("Name", "index-a-one"), HaveField("Name", "index-a-two")))
		secrets := &corev1.SecretList{}
		g.Expect(c.List(ctx, secrets, client.InNamespace(kcpNamespace), index.OfKyma(other))).To(Succeed())
		g.Expect(secrets.Items).To(ConsistOf(HaveField("Name", "index-a-b-kubeconfig")))
	}, timeout, interval).Should(Succeed())

	// The runtime cache finds the Kyma's one Secret through the index.
	runtimes := remote.NewCache(c, nil, remote.Options{Scheme: env.kcpClient.Scheme(), Namespace: kcpNamespace, Indexed: true})
	cluster, err := runtimes.Get(ctx, own)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cluster.Identity().SecretUID).To(Equal(objects[3].GetUID()))
}
