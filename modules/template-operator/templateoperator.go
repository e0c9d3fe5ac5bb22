// Package templateoperator is the template module operator: the reference
// for module teams of how a module operator is built on pkg/declarative and
// packaged with `lmctl module build` (SPEC R16). Its files (module.yaml,
// config/, default-cr.yaml, README.md) are what `lmctl module init`
// scaffolds a new module repository from.
package templateoperator

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"text/template"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/render"
	"github.com/runtime-fleet/lifecycle-manager/pkg/declarative"
)

// Files are the module's repository: module.yaml and what it names. `lmctl
// dev` and the tests package the module from them, `lmctl module init`
// scaffolds new modules from them.
//
//go:embed module.yaml default-cr.yaml README.md config
var Files embed.FS

//go:embed manifests
var manifests embed.FS

// Name is the module's name.
const Name = "template-operator"

// GVK is the kind of the module's custom resource.
var GVK = schema.GroupVersionKind{Group: "template-operator.kyma-project.io", Version: "v1alpha1", Kind: "Sample"}

// crdName is the name of the module's CRD, which Run waits for.
const crdName = "samples.template-operator.kyma-project.io"

// Identity of the operator's writes.
const (
	FieldManager = "template-operator"
	Finalizer    = "template-operator.kyma-project.io/finalizer"
)

// Render makes the objects of one Sample from the embedded manifests, Go
// templates that see the Sample's .Name, .Namespace and .Spec.
func Render(obj *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	data := map[string]any{"Name": obj.GetName(), "Namespace": obj.GetNamespace(), "Spec": spec}
	tmpl := template.New("manifests").Option("missingkey=zero").Funcs(template.FuncMap{
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"default": func(def, v any) any {
			if v == nil || v == "" {
				return def
			}
			return v
		},
	})
	if _, err := tmpl.ParseFS(manifests, "manifests/*.yaml"); err != nil {
		return nil, fmt.Errorf("parsing the manifests: %w", err)
	}
	names, err := fs.Glob(manifests, "manifests/*.yaml")
	if err != nil {
		return nil, err
	}
	var objects []*unstructured.Unstructured
	for _, name := range names {
		var out bytes.Buffer
		if err := tmpl.ExecuteTemplate(&out, path.Base(name), data); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", name, err)
		}
		parsed, err := render.Raw(out.Bytes())
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", name, err)
		}
		objects = append(objects, parsed...)
	}
	return objects, nil
}

// NewReconciler is the operator's one controller.
func NewReconciler(c client.Client) *declarative.Reconciler {
	return &declarative.Reconciler{
		Client:            c,
		GVK:               GVK,
		Render:            Render,
		FieldManager:      FieldManager,
		Finalizer:         Finalizer,
		RequeueProcessing: time.Second,
	}
}

// RunOptions tune Run.
type RunOptions struct {
	// CRDPoll is how often Run looks for the module's CRD before it starts
	// (1 s when zero): the lifecycle manager installs it with the module.
	CRDPoll time.Duration
}

// Run runs the operator against the cluster at cfg until ctx ends, once the
// module's CRD is there. cmd/manager runs it in the module's Deployment;
// `lmctl dev` and the tests run it in-process as the stand-in for that
// Deployment, one per runtime.
func Run(ctx context.Context, cfg *rest.Config, opts RunOptions) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := waitForCRD(ctx, cfg, scheme, opts.CRDPoll); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// One process may run it against several runtimes (lmctl dev).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := NewReconciler(mgr.GetClient()).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	return mgr.Start(ctx)
}

func waitForCRD(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, poll time.Duration) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if poll <= 0 {
		poll = time.Second
	}
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err == nil && established(crd) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
