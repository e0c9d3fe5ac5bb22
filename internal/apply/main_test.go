package apply_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/transform"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// The runtime a module is applied to is, for this package, nothing but an
// API server: one real kube-apiserver and etcd for the whole package, a
// namespace (and CRD group) per test.
var (
	runtimeClient client.Client
	// runtimeConfig reaches the same API server, for clients with hooks.
	runtimeConfig *rest.Config
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	start := time.Now()
	cp, err := testcluster.StartControlPlane(ctx, testcluster.ControlPlaneOptions{CRDDirectoryPaths: []string{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	fmt.Printf("apply: control plane started in %s\n", time.Since(start).Round(10*time.Millisecond))

	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	runtimeConfig = cp.Config()
	if runtimeClient, err = client.New(runtimeConfig, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// module is one test's module: its owner, its namespace in the runtime
// (created by the test, so not the module's), and a CRD group of its own.
type module struct {
	owner     apply.Owner
	namespace string
	group     string
}

// newModule creates the test's namespace and names a module of a Kyma of
// its own.
func newModule(t *testing.T) module {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apply-"}}
	NewWithT(t).Expect(runtimeClient.Create(context.Background(), ns)).To(Succeed())
	return module{
		owner: apply.Owner{
			Kyma:          "kyma-" + ns.Name,
			Module:        "first",
			Manifest:      "kcp-system/kyma-" + ns.Name + "-first",
			SyncNamespace: "kyma-system",
		},
		namespace: ns.Name,
		group:     ns.Name + ".apply.test",
	}
}

// content renders YAML documents as the operator renders a module's
// content: %[1]s is the test's namespace, %[2]s its CRD group (a document
// that uses neither is taken as it is); objects get
// the module's ownership labels and, when they name none, the namespace.
func (m module) content(t *testing.T, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	objects := make([]*unstructured.Unstructured, 0, len(docs))
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if strings.Contains(doc, "%[") {
			doc = fmt.Sprintf(doc, m.namespace, m.group)
		}
		g.Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
		objects = append(objects, obj)
	}
	manifest := strings.SplitN(m.owner.Manifest, "/", 2)
	g.Expect(transform.Objects(objects, transform.Options{
		KymaName:         m.owner.Kyma,
		ModuleName:       m.owner.Module,
		Manifest:         types.NamespacedName{Namespace: manifest[0], Name: manifest[1]},
		DefaultNamespace: m.namespace,
		Scope:            transform.RESTMapperScope(runtimeClient.RESTMapper()),
	})).To(Succeed())
	return objects
}

// applier applies to the test runtime.
func applier() *apply.Applier {
	return apply.NewApplier(runtimeClient, runtimeClient.RESTMapper())
}

// deleteRecorder passes every request to the real API server and records,
// in order, the objects that deletions were asked for: the order is the
// point of some guards, and the API server keeps no record of it.
type deleteRecorder struct {
	mu      sync.Mutex
	deleted []string
}

func (r *deleteRecorder) client(t *testing.T) client.WithWatch {
	return interceptor.NewClient(newWithWatch(t), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			r.mu.Lock()
			r.deleted = append(r.deleted, kindOf(obj)+" "+obj.GetName())
			r.mu.Unlock()
			return c.Delete(ctx, obj, opts...)
		},
	})
}

func (r *deleteRecorder) order() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.deleted...)
}

func kindOf(obj client.Object) string {
	if kind := obj.GetObjectKind().GroupVersionKind().Kind; kind != "" {
		return kind
	}
	gvks, _, err := runtimeClient.Scheme().ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return fmt.Sprintf("%T", obj)
	}
	return gvks[0].Kind
}

// live reads an object's metadata; nil when it does not exist.
func live(g Gomega, apiVersion, kind, namespace, name string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.APIVersion, obj.Kind = apiVersion, kind
	err := runtimeClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return nil
	}
	return obj
}

// ownedBy says whether labels carry all three of owner's ownership labels.
func ownedBy(owner apply.Owner) OmegaMatcher {
	return And(
		HaveKeyWithValue(v1beta2.ManagedByLabel, v1beta2.ManagedByValue),
		HaveKeyWithValue(v1beta2.KymaNameLabel, owner.Kyma),
		HaveKeyWithValue(v1beta2.ModuleNameLabel, owner.Module),
	)
}

// noOwnershipLabels matches labels without any of the ownership labels.
func noOwnershipLabels() OmegaMatcher {
	return And(
		Not(HaveKey(v1beta2.ManagedByLabel)),
		Not(HaveKey(v1beta2.KymaNameLabel)),
		Not(HaveKey(v1beta2.ModuleNameLabel)),
	)
}

// resource is an inventory entry (every kind here is served at v1).
func resource(group, kind, namespace, name string) v1beta2.Resource {
	return v1beta2.Resource{
		GroupVersionKind: metav1.GroupVersionKind{Group: group, Version: "v1", Kind: kind},
		Namespace:        namespace,
		Name:             name,
	}
}

// widgetServed waits until the runtime serves the module's Widget kind:
// an applied CRD is Established a moment before discovery lists it, and a
// client's first request for the kind in between finds no match (the
// operator retries such a request; a test that goes on at once waits).
func (m module) widgetServed(t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		_, err := runtimeClient.RESTMapper().RESTMapping(schema.GroupKind{Group: m.group, Kind: "Widget"}, "v1")
		return err
	}).WithTimeout(time.Minute).Should(Succeed())
}
