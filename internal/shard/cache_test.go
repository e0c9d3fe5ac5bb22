package shard

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

var (
	kcp   *testcluster.ControlPlane
	admin client.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if kcp, err = testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = kcp.Stop() }()
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := v1beta2.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if admin, err = client.New(kcp.Config(), client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// TestCacheHidesOtherShards runs the caches of two shards over one
// namespace: each answers for its own Kymas and their Manifests alone, both
// for what belongs to no Kyma, and an informer's handlers never hear of
// another shard's objects.
func TestCacheHidesOtherShards(t *testing.T) {
	ctx := t.Context()
	namespace := createNamespace(t)
	mine, theirs := nameIn(t, 0), nameIn(t, 1)
	for _, name := range []string{mine, theirs} {
		createKyma(t, namespace, name)
		manifest := &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{
			Name: name + "-module", Namespace: namespace, Labels: map[string]string{v1beta2.KymaNameLabel: name},
		}, Spec: v1beta2.ManifestSpec{Remote: true}}
		if err := admin.Create(ctx, manifest); err != nil {
			t.Fatal(err)
		}
	}
	template := &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{Name: "template", Namespace: namespace}}
	if err := admin.Create(ctx, template); err != nil {
		t.Fatal(err)
	}

	c := startCache(t, Shard{Count: 2, ID: 0}, namespace)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: mine}, &v1beta2.Kyma{}); err != nil {
		t.Errorf("Get of the shard's own Kyma: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: theirs}, &v1beta2.Kyma{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of another shard's Kyma: %v, want NotFound", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: theirs + "-module"}, &v1beta2.Manifest{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of another shard's Manifest: %v, want NotFound", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(template), &v1beta2.ModuleTemplate{}); err != nil {
		t.Errorf("Get of a ModuleTemplate, which is every shard's: %v", err)
	}
	kymas := &v1beta2.KymaList{}
	if err := c.List(ctx, kymas, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	if names := namesOf(kymas.Items); !slices.Equal(names, []string{mine}) {
		t.Errorf("List of Kymas = %v, want only the shard's %s", names, mine)
	}
	manifests := &metav1.PartialObjectMetadataList{}
	manifests.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("ManifestList"))
	if err := c.List(ctx, manifests, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	if len(manifests.Items) != 1 || manifests.Items[0].Name != mine+"-module" {
		t.Errorf("metadata List of Manifests = %v, want only %s-module", manifests.Items, mine)
	}

	// Events arrive in the order of the writes: once the handler hears of
	// the Kyma created last, it would have heard of the one before.
	informer, err := c.GetInformer(ctx, &v1beta2.Kyma{})
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan string, 16)
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { heard <- obj.(*v1beta2.Kyma).Name },
	}); err != nil {
		t.Fatal(err)
	}
	newTheirs, newMine := nameIn(t, 1, theirs), nameIn(t, 0, mine)
	createKyma(t, namespace, newTheirs)
	createKyma(t, namespace, newMine)
	var got []string
	for !slices.Contains(got, newMine) {
		select {
		case name := <-heard:
			got = append(got, name)
		case <-time.After(30 * time.Second):
			t.Fatalf("the handler heard %v, never %s", got, newMine)
		}
	}
	if slices.Contains(got, newTheirs) || slices.Contains(got, theirs) {
		t.Errorf("the handler of shard 0 heard of %v, which holds Kymas of shard 1", got)
	}
}

func startCache(t *testing.T, s Shard, namespace string) cache.Cache {
	t.Helper()
	scheme := admin.Scheme()
	c, err := s.NewCache(cache.New)(kcp.Config(), cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	// Informers start when first asked for; ask for the kinds read here.
	for _, obj := range []client.Object{&v1beta2.Kyma{}, &v1beta2.Manifest{}, &v1beta2.ModuleTemplate{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	return c
}

func createNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shard-"}}
	if err := admin.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func createKyma(t *testing.T, namespace, name string) {
	t.Helper()
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: v1beta2.KymaSpec{Channel: "regular"}}
	if err := admin.Create(t.Context(), kyma); err != nil {
		t.Fatal(err)
	}
}

func namesOf(kymas []v1beta2.Kyma) []string {
	names := make([]string, 0, len(kymas))
	for _, k := range kymas {
		names = append(names, k.Name)
	}
	return names
}
