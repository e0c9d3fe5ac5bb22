package takeover_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/takeover"
	klm "github.com/runtime-fleet/lifecycle-manager/internal/takeover"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

const namespace = "kcp-system"

var kcp client.Client

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts a control plane with the project's CRDs and the leftovers
// controllers on it, as the operator runs them under --klm-takeover.
func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp, err := testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	scheme := k8sruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1beta2.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(cp.Config(), ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&takeover.Leftovers{Client: mgr.GetClient(), Namespace: namespace}).SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = mgr.Start(ctx) }()
	kcp = mgr.GetClient()
	if err := kcp.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// TestKLMsFinalizersOnFleetObjectsGo writes a Watcher and a mandatory
// ModuleReleaseMeta as KLM leaves them, each with KLM's finalizer and one
// of another party: KLM's goes, the other stays, and the objects can be
// deleted once the other party lets go (KLM, stopped, never would have).
func TestKLMsFinalizersOnFleetObjectsGo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const other = "backup.example/keep"
	watcher := &v1beta2.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: "klm-watcher", Namespace: namespace, Finalizers: []string{v1beta2.WatcherFinalizer, other}},
		Spec: v1beta2.WatcherSpec{
			ServiceInfo:     v1beta2.Service{Name: "klm-controller-manager-events", Namespace: namespace, Port: 8082},
			ResourceToWatch: v1beta2.WatchableGVR{Group: "operator.kyma-project.io", Version: "*", Resource: "kymas"},
			Field:           v1beta2.SpecField,
			Manager:         "lifecycle-manager",
		},
	}
	meta := &v1beta2.ModuleReleaseMeta{
		ObjectMeta: metav1.ObjectMeta{Name: "mandatory", Namespace: namespace, Finalizers: []string{klm.MandatoryModuleFinalizer, other}},
		Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: "mandatory", Mandatory: &v1beta2.Mandatory{Version: "1.0.0"}},
	}
	// Elsewhere (not the operator's namespace) nothing is touched.
	foreign := &v1beta2.ModuleReleaseMeta{
		ObjectMeta: metav1.ObjectMeta{Name: "mandatory", Namespace: "default", Finalizers: []string{klm.MandatoryModuleFinalizer}},
		Spec:       v1beta2.ModuleReleaseMetaSpec{ModuleName: "mandatory", Mandatory: &v1beta2.Mandatory{Version: "1.0.0"}},
	}
	// foreign goes first: the informer hands out the ModuleReleaseMetas
	// in order, so once meta is released, foreign was seen (and left).
	for _, obj := range []client.Object{foreign, watcher, meta} {
		g.Expect(kcp.Create(ctx, obj)).To(Succeed())
	}
	for _, obj := range []client.Object{watcher, meta} {
		g.Eventually(func(g Gomega) {
			g.Expect(kcp.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			g.Expect(obj.GetFinalizers()).To(Equal([]string{other}), "%T: KLM's finalizer goes, the other stays", obj)
		}, time.Minute, 50*time.Millisecond).Should(Succeed())
		g.Expect(kcp.Delete(ctx, obj)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(kcp.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			obj.SetFinalizers(nil)
			g.Expect(kcp.Update(ctx, obj)).To(Succeed())
		}, time.Minute, 50*time.Millisecond).Should(Succeed(), "the other party lets go")
		g.Eventually(func() bool { return apierrors.IsNotFound(kcp.Get(ctx, client.ObjectKeyFromObject(obj), obj)) }, time.Minute, 50*time.Millisecond).Should(BeTrue())
	}
	g.Expect(kcp.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
	g.Expect(foreign.Finalizers).To(ConsistOf(klm.MandatoryModuleFinalizer), "outside the operator's namespace")
	foreign.Finalizers = nil
	g.Expect(kcp.Update(ctx, foreign)).To(Succeed())
	g.Expect(kcp.Delete(ctx, foreign)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(kcp.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)) }, time.Minute, 50*time.Millisecond).Should(BeTrue())
}
