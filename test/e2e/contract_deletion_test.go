package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// TestKymaDeletionShowsInTheRuntimeFirst deletes the Kyma of a module whose
// removal a user's custom resource blocks, and checks the order the runtime
// owner sees (KLM #3295, #3296): the runtime's own Kyma is Deleting, with
// the module and what blocks it, before the first Manifest is deleted; it
// stays, saying so, while the removal waits; and it is removed last, once
// no Manifest of the Kyma is left.
func TestKymaDeletionShowsInTheRuntimeFirst(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	k, m := installTemplateOperator(t, "tpl-shows-deletion")
	rc := k.runtime.client
	runtimeKey := client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: v1beta2.DefaultRuntimeKymaName}

	users := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"owner": "a user"}}}
	users.SetGroupVersionKind(m.kind())
	users.SetNamespace(v1beta2.DefaultRuntimeNamespace)
	users.SetName("users-sample")
	g.Expect(rc.Create(ctx, users)).To(Succeed())

	atFirstManifestDeletion := watchFirst(t, env.kcp.Config(), &v1beta2.ManifestList{}, []client.ListOption{client.InNamespace(kcpNamespace)},
		func(ev watch.Event) bool {
			manifest, ok := ev.Object.(*v1beta2.Manifest)
			return ok && manifest.Labels[v1beta2.KymaNameLabel] == k.name && manifest.DeletionTimestamp != nil
		},
		func() any {
			runtimeKyma := &v1beta2.Kyma{}
			if err := rc.Get(ctx, runtimeKey, runtimeKyma); err != nil {
				return err
			}
			return runtimeKyma.Status.State
		})
	atRuntimeKymaRemoval := watchFirst(t, k.runtime.cluster.Config(), &v1beta2.KymaList{}, []client.ListOption{client.InNamespace(runtimeKey.Namespace)},
		func(ev watch.Event) bool { return ev.Type == watch.Deleted },
		func() any {
			manifests := &v1beta2.ManifestList{}
			if err := env.kcpClient.List(ctx, manifests, client.InNamespace(kcpNamespace), client.MatchingLabels{v1beta2.KymaNameLabel: k.name}); err != nil {
				return err
			}
			return len(manifests.Items)
		})

	g.Expect(env.kcpClient.Delete(ctx, &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}})).To(Succeed())
	const named = "TemplateSample kyma-system/users-sample"
	g.Eventually(func(g Gomega) {
		runtimeKyma := &v1beta2.Kyma{}
		g.Expect(rc.Get(ctx, runtimeKey, runtimeKyma)).To(Succeed())
		g.Expect(runtimeKyma.DeletionTimestamp).To(BeNil(), "the runtime's Kyma is removed last, not marked at once")
		g.Expect(runtimeKyma.Status.State).To(Equal(v1beta2.StateDeleting))
		ready := meta.FindStatusCondition(runtimeKyma.Status.Conditions, v1beta2.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(v1beta2.ReasonDeleting))
		g.Expect(ready.Message).To(Equal("Waiting for 1 modules to be removed from the runtime; see status.modules"))
		g.Expect(runtimeKyma.Status.Modules).To(ConsistOf(And(
			HaveField("Name", m.name),
			HaveField("State", v1beta2.StateDeleting),
			HaveField("Message", ContainSubstring(named)),
		)))
	}, timeout, interval).Should(Succeed())
	g.Expect(atFirstManifestDeletion()).To(Equal(v1beta2.StateDeleting),
		"when the first Manifest was deleted, the runtime's Kyma already showed Deleting")

	g.Expect(rc.Delete(ctx, users)).To(Succeed())
	expectRemoved(t, k, m, time.Now())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(rc.Get(ctx, runtimeKey, &v1beta2.Kyma{}))).To(BeTrue(), "the runtime's Kyma goes in the end")
		g.Expect(apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, &v1beta2.Kyma{}))).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Expect(atRuntimeKymaRemoval()).To(Equal(0), "when the runtime's Kyma was removed, no Manifest of the Kyma was left")
}

// watchFirst watches list through a client of config and, at the first
// event that matches, runs then and keeps what it returns. The returned
// function stops the watch and gives that value (nil when no event
// matched). Running then from the event handler reads the state at that
// moment, after the event and before anything later could undo it.
func watchFirst(t *testing.T, config *rest.Config, list client.ObjectList, opts []client.ListOption, match func(watch.Event) bool, then func() any) func() any {
	t.Helper()
	g := NewWithT(t)
	wc, err := client.NewWithWatch(config, client.Options{Scheme: env.kcpClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(context.Background(), list, opts...)
	g.Expect(err).NotTo(HaveOccurred())
	var (
		mu    sync.Mutex
		found any
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if !match(ev) {
				continue
			}
			value := then()
			mu.Lock()
			found = value
			mu.Unlock()
			w.Stop()
		}
	}()
	t.Cleanup(w.Stop)
	return func() any {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return found
	}
}
