package content

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
)

const (
	timeout  = 90 * time.Second
	interval = 100 * time.Millisecond
)

// runtimeHandle is the kwok runtime the tests take turns on.
type runtimeHandle struct {
	name    string
	cluster *testcluster.Runtime
	client  client.Client
}

func newRuntimeHandle(name string, r *testcluster.Runtime) (*runtimeHandle, error) {
	c, err := testenv.NewClient(r.Config())
	if err != nil {
		return nil, err
	}
	return &runtimeHandle{name: name, cluster: r, client: c}, nil
}

// newKyma takes the runtime, registers it under a Kyma of the test with the
// given modules (regular channel), and at the end of the test deletes the
// Kyma, which must succeed whatever state its modules are in.
func newKyma(t *testing.T, modules ...string) string {
	t.Helper()
	ctx := context.Background()
	rt := <-env.runtimes
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	name = strings.TrimRight(name[:min(len(name), 40)], "-")

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-kubeconfig", Namespace: kcpNamespace,
			Labels: map[string]string{v1beta2.KymaNameLabel: name},
		},
		Data: map[string][]byte{"config": rt.cluster.Kubeconfig()},
	}
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: rt.name}},
		Spec:       v1beta2.KymaSpec{Channel: "regular"},
	}
	for _, m := range modules {
		kyma.Spec.Modules = append(kyma.Spec.Modules, v1beta2.Module{Name: m, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete})
	}
	for _, obj := range []client.Object{secret, kyma} {
		if err := env.kcpClient.Create(ctx, obj); err != nil {
			env.runtimes <- rt
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
	t.Cleanup(func() {
		defer func() { env.runtimes <- rt }()
		g := NewWithT(t)
		g.Expect(client.IgnoreNotFound(env.kcpClient.Delete(ctx, kyma))).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), &v1beta2.Kyma{}))
		}, timeout, interval).Should(BeTrue(), "Kyma %s was not deleted", name)
		g.Expect(env.kcpClient.Delete(ctx, secret)).To(Succeed())
	})
	return name
}

// publishModule offers a module version 1.0.0 on the regular channel whose
// content is at the given links (resource name → link).
func publishModule(t *testing.T, module string, links map[string]string) {
	t.Helper()
	ctx := context.Background()
	v := samplemodules.Version{Module: module, Version: "1.0.0"}
	g := NewWithT(t)
	template := v.Template(kcpNamespace, links)
	meta := samplemodules.ReleaseMeta(kcpNamespace, module, map[string]string{"regular": "1.0.0"})
	for _, obj := range []client.Object{template, meta} {
		g.Expect(env.kcpClient.Create(ctx, obj)).To(Succeed())
		// Gone after the test's Kyma (cleanups run last first), so that a
		// rerun (-count) publishes the module anew.
		t.Cleanup(func() { _ = env.kcpClient.Delete(context.Background(), obj) })
	}
}

// manifest returns the Manifest of a Kyma's module.
func manifest(g Gomega, kyma, module string) *v1beta2.Manifest {
	list := &v1beta2.ManifestList{}
	g.Expect(env.kcpClient.List(context.Background(), list, client.InNamespace(kcpNamespace),
		client.MatchingLabels{v1beta2.KymaNameLabel: kyma})).To(Succeed())
	for i := range list.Items {
		if list.Items[i].Spec.ModuleName == module {
			return &list.Items[i]
		}
	}
	g.Expect(list.Items).To(ContainElement(HaveField("Spec.ModuleName", module)), "Kyma %s has no Manifest of %s", kyma, module)
	return nil
}

// readyMessage is the message of a Manifest's Ready condition.
func readyMessage(m *v1beta2.Manifest) string {
	if c := meta.FindStatusCondition(m.Status.Conditions, "Ready"); c != nil {
		return c.Message
	}
	return ""
}

// eventuallyError waits until the module's Manifest is in Error and one of
// its Warning events gives a cause containing want (raw error text goes to
// events; the condition says the error's class), and returns that event's
// note.
func eventuallyError(t *testing.T, kyma, module, want string) string {
	t.Helper()
	var msg string
	NewWithT(t).Eventually(func(g Gomega) {
		m := manifest(g, kyma, module)
		g.Expect(m.Status.State).To(Equal(v1beta2.StateError), "%s: %s", module, readyMessage(m))
		g.Expect(readyMessage(m)).To(ContainSubstring("The module's content cannot be fetched or rendered"))
		list := &eventsv1.EventList{}
		g.Expect(env.kcpClient.List(context.Background(), list, client.InNamespace(kcpNamespace))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.UID == m.UID && e.Type == corev1.EventTypeWarning {
				notes = append(notes, e.Note)
				if strings.Contains(e.Note, want) {
					msg = e.Note
				}
			}
		}
		g.Expect(msg).NotTo(BeEmpty(), "%s: no event gives %q; events: %q", module, want, notes)
	}, timeout, interval).Should(Succeed())
	return msg
}

// eventsMentioning returns the notes of the events in the KCP namespace
// that contain s.
func eventsMentioning(g Gomega, s string) []string {
	var found []string
	list := &eventsv1.EventList{}
	g.Expect(env.kcpClient.List(context.Background(), list, client.InNamespace(kcpNamespace))).To(Succeed())
	for _, e := range list.Items {
		if strings.Contains(e.Note, s) {
			found = append(found, e.Note)
		}
	}
	legacy := &corev1.EventList{}
	g.Expect(env.kcpClient.List(context.Background(), legacy, client.InNamespace(kcpNamespace))).To(Succeed())
	for _, e := range legacy.Items {
		if strings.Contains(e.Message, s) {
			found = append(found, e.Message)
		}
	}
	return found
}

// memorySampler records the operator process's peak heap while a test
// runs. The operator runs in the test binary, so this is the operator's
// memory (plus the test's own, which streams and holds nothing).
type memorySampler struct {
	base, peak, baseSys uint64
	sys                 uint64
	stop, done          chan struct{}
}

func sampleMemory() *memorySampler {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := &memorySampler{base: ms.HeapAlloc, peak: ms.HeapAlloc, baseSys: ms.Sys, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		ticker := time.NewTicker(5 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-ticker.C:
				runtime.ReadMemStats(&ms)
				s.peak = max(s.peak, ms.HeapAlloc)
				s.sys = ms.Sys
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the peak heap growth and the growth of
// memory obtained from the OS, in bytes.
func (s *memorySampler) Stop() (heap, sys uint64) {
	close(s.stop)
	<-s.done
	return s.peak - s.base, max(s.sys, s.baseSys) - s.baseSys
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
