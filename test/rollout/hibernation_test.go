package rollout

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/status"
)

// A runtime whose hibernation schedule says it sleeps is paused: its
// status says until when, lmctl status shows it, a new version on its
// channel does not reach it; at its wake time it resumes and catches up.
// A runtime of another label group is not touched by the schedule.
func TestHibernationScheduleSleepsAndWakes(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	const module = "pillow"
	publish(t, module, "1.0.0", configMap(module, "1.0.0"))
	publish(t, module, "2.0.0", configMap(module, "2.0.0"))
	offer(t, module)
	names := newFleet(t, "pillow", module, 2)
	sleepy, awake := names[0], names[1]
	eventuallyAt(names, module, "1.0.0")

	// 13:30 on the fake clock's day: the nap.
	now := clock.Now().UTC()
	clock.SetTime(time.Date(now.Year(), now.Month(), now.Day(), 13, 30, 0, 0, time.UTC))
	wakes := time.Date(now.Year(), now.Month(), now.Day(), 14, 0, 0, 0, time.UTC)
	k := &v1beta2.Kyma{}
	k.SetNamespace(kcpNamespace)
	k.SetName(sleepy)
	Expect(env.kcpClient.Patch(ctx, k, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"hibernate":"nap"}}}`)))).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: sleepy}, k)).To(Succeed())
		paused := meta.FindStatusCondition(k.Status.Conditions, kyma.ConditionPaused)
		g.Expect(paused).NotTo(BeNil())
		g.Expect(paused.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(paused.Reason).To(Equal(kyma.ReasonHibernated))
		g.Expect(paused.Message).To(ContainSubstring("Hibernated by schedule nap until " + wakes.Format(time.RFC3339)))
	}, timeout, interval).Should(Succeed())
	fleet, err := status.Get(ctx, env.kcpClient, kcpNamespace)
	Expect(err).NotTo(HaveOccurred())
	rt, ok := fleet.Runtime(sleepy)
	Expect(ok).To(BeTrue())
	Expect(rt.Paused).To(ContainSubstring("Hibernated by schedule nap"), "lmctl status shows it")

	moveChannel(t, module)
	eventuallyAt([]string{awake}, module, "2.0.0")
	Consistently(func(g Gomega) {
		m := &v1beta2.Manifest{}
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(sleepy, module)}, m)).To(Succeed())
		g.Expect(m.Spec.Version).To(Equal("1.0.0"), "nothing reaches a sleeping runtime")
	}, 2*time.Second, interval).Should(Succeed())

	clock.SetTime(wakes.Add(time.Minute))
	touch(sleepy)
	eventuallyAt([]string{sleepy}, module, "2.0.0")
	Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: sleepy}, k)).To(Succeed())
	Expect(meta.FindStatusCondition(k.Status.Conditions, kyma.ConditionPaused)).To(BeNil(), "awake, the pause is gone from status")
}
