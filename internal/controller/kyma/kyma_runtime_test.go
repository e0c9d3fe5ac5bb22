package kyma

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/remote"
)

// TestRuntimeKymaReadWholeOnlyWhenItChanged: the periodic look reads the
// runtime's own Kyma whole only when its resourceVersion differs from the
// copy the operator last read or wrote; otherwise the copy stands in. An
// owner's change, the operator's own status write and a deletion are each
// seen as they are.
func TestRuntimeKymaReadWholeOnlyWhenItChanged(t *testing.T) {
	startRemovalsEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	name := "runtimekyma-" + testID(t)
	g.Expect(removalsEnv.client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: removalsNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{remote.KubeconfigKey: removalsEnv.runtime.Kubeconfig()},
	})).To(Succeed())
	runtimes := remote.NewCache(removalsEnv.client, removalsEnv.client, remote.Options{Scheme: removalsEnv.scheme, Namespace: removalsNamespace, QPS: 100, Burst: 200})
	cluster, err := runtimes.Get(ctx, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(newRuntimeSide(removalsEnv.client).syncCRDs(ctx, cluster)).To(Succeed())

	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: removalsNamespace}, Spec: v1beta2.KymaSpec{Channel: "regular"}}
	key := client.ObjectKey{Namespace: "rk-" + testID(t), Name: v1beta2.DefaultRuntimeKymaName}
	sync := func(g Gomega) (*v1beta2.Kyma, bool) {
		got, recreate, err := syncRuntimeKyma(ctx, cluster, kyma, key)
		g.Expect(err).NotTo(HaveOccurred())
		return got, recreate
	}
	var created *v1beta2.Kyma
	// The runtime's API server serves the Kyma kind once its CRD is established.
	g.Eventually(func(g Gomega) { created, _ = sync(g) }).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	// The copy stands in while the resourceVersion stays: marked here
	// without a write, the mark says which one was returned.
	seen, ok := remote.Recall[seenRuntimeKyma](cluster)
	g.Expect(ok).To(BeTrue(), "the created Kyma is remembered")
	g.Expect(seen.kyma.ResourceVersion).To(Equal(created.ResourceVersion))
	marked := seen.kyma.DeepCopy()
	marked.Annotations = map[string]string{"test/read-from": "memo"}
	remote.Remember(cluster, seenRuntimeKyma{kyma: marked})
	got, _ := sync(g)
	g.Expect(got.Annotations).To(HaveKeyWithValue("test/read-from", "memo"), "an unchanged Kyma is not read whole")
	got.Annotations["test/read-from"] = "changed by the caller"
	got, _ = sync(g)
	g.Expect(got.Annotations).To(HaveKeyWithValue("test/read-from", "memo"), "callers get a copy, never the memo itself")

	// The runtime owner lists a module: a new resourceVersion, read whole.
	owned := &v1beta2.Kyma{}
	g.Expect(cluster.Client.Get(ctx, key, owned)).To(Succeed())
	owned.Spec.Modules = []v1beta2.Module{{Name: "keda"}}
	g.Expect(cluster.Client.Update(ctx, owned)).To(Succeed())
	got, _ = sync(g)
	g.Expect(got.Spec.Modules).To(ConsistOf(HaveField("Name", "keda")), "the owner's change is read")
	g.Expect(got.Annotations).NotTo(HaveKey("test/read-from"))

	// The operator's own status write is remembered as the API server
	// returned it, so the next look does not read it back whole.
	recorded := kyma.DeepCopy()
	recorded.Status.State = v1beta2.StateReady
	g.Expect(mirrorStatus(ctx, cluster, got, recorded)).To(Succeed())
	live := &v1beta2.Kyma{}
	g.Expect(cluster.Client.Get(ctx, key, live)).To(Succeed())
	seen, _ = remote.Recall[seenRuntimeKyma](cluster)
	g.Expect(seen.kyma.ResourceVersion).To(Equal(live.ResourceVersion))
	g.Expect(seen.kyma.Status.State).To(Equal(v1beta2.StateReady))
	got, _ = sync(g)
	g.Expect(got.Status.State).To(Equal(v1beta2.StateReady))
	g.Expect(got.Spec.Modules).To(ConsistOf(HaveField("Name", "keda")))

	// Deleted by its owner: seen being deleted, let go, then made again.
	g.Expect(cluster.Client.Delete(ctx, live)).To(Succeed())
	_, recreate := sync(g)
	g.Expect(recreate).To(BeTrue(), "the deletion is seen, not hidden by the copy")
	again, _ := sync(g)
	g.Expect(again.UID).NotTo(Equal(created.UID), "a new Kyma in the runtime")
	g.Expect(again.DeletionTimestamp).To(BeNil())
}
