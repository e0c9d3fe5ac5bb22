package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"sync/atomic"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

//go:embed web
var web embed.FS

// Options configure a console.
type Options struct {
	// Config reaches the control plane; the console reads with it (the
	// user's kubeconfig for lmctl console, the console's ServiceAccount in
	// the cluster).
	Config *rest.Config
	// Namespace holds the Kymas and the rest the console shows.
	Namespace     string
	Authenticator Authenticator
	Access        Access
	// Now tells the time for ages; time.Now when nil.
	Now func() time.Time
}

// Console serves the pages. Start runs its informers; until they have
// listed, pages answer 503.
type Console struct {
	opts  Options
	cache cache.Cache
	hub   *hub
	model *model
	// modelSynced says whether the model has had the Kymas of the
	// informer's first list; set by Start.
	modelSynced atomic.Pointer[func() bool]
	pages       map[string]*template.Template
	mux         *http.ServeMux
}

// kinds are what the console reads, and the resource its viewers must be
// allowed to list to see each. There is no Secret among them, on purpose.
var kinds = []struct {
	obj      client.Object
	resource string
}{
	{&v1beta2.Kyma{}, "kymas"},
	{&v1beta2.Manifest{}, "manifests"},
	{&v1beta2.ModuleTemplate{}, "moduletemplates"},
	{&v1beta2.ModuleReleaseMeta{}, "modulereleasemetas"},
	{&v1beta2.ModuleRollout{}, "modulerollouts"},
	{&v1beta2.RuntimeBackup{}, "runtimebackups"},
}

// New makes a console; Start runs it.
func New(o Options) (*Console, error) {
	if o.Config == nil || o.Namespace == "" || o.Authenticator == nil || o.Access == nil {
		return nil, errors.New("console: Config, Namespace, Authenticator and Access are all needed")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	scheme := k8sruntime.NewScheme()
	if err := v1beta2.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := cache.New(o.Config, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{o.Namespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
		// A Manifest is kept for its operation history alone: its spec
		// and the rest of its status are the larger part of it.
		ByObject: map[client.Object]cache.ByObject{&v1beta2.Manifest{}: {Transform: trimManifest}},
	})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	con := &Console{opts: o, cache: c, hub: newHub(), model: newModel()}
	if con.pages, err = parsePages(); err != nil {
		return nil, err
	}
	con.routes()
	return con, nil
}

// trimManifest keeps what the runtime page shows of a Manifest.
func trimManifest(obj any) (any, error) {
	m, ok := obj.(*v1beta2.Manifest)
	if !ok {
		return obj, nil
	}
	return &v1beta2.Manifest{
		TypeMeta:   m.TypeMeta,
		ObjectMeta: metav1ObjectMeta(m),
		Status:     v1beta2.ManifestStatus{Operations: m.Status.Operations},
	}, nil
}

// Start runs the informers until ctx ends, telling the open pages of every
// change.
func (c *Console) Start(ctx context.Context) error {
	for _, k := range kinds {
		informer, err := c.cache.GetInformer(ctx, k.obj, cache.BlockUntilSynced(false))
		if err != nil {
			return err
		}
		notify := c.notifier(k.obj)
		registration, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { notify(obj, false) },
			UpdateFunc: func(_, obj any) { notify(obj, false) },
			DeleteFunc: func(obj any) { notify(obj, true) },
		})
		if err != nil {
			return err
		}
		if _, ok := k.obj.(*v1beta2.Kyma); ok {
			synced := registration.HasSynced
			c.modelSynced.Store(&synced)
		}
	}
	return c.cache.Start(ctx)
}

// notifier keeps the model of a Kyma's change, then names the runtime an
// object of kind belongs to: the Kyma itself, or a Manifest's Kyma; other
// kinds change the fleet's pages only. The model changes first, so that a
// page told of a change fetches the new row.
func (c *Console) notifier(kind client.Object) func(obj any, deleted bool) {
	return func(obj any, deleted bool) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		o, ok := obj.(client.Object)
		if !ok {
			return
		}
		switch kind.(type) {
		case *v1beta2.Kyma:
			if k, ok := o.(*v1beta2.Kyma); ok && !deleted {
				c.model.put(k)
			} else {
				c.model.remove(o.GetName())
			}
			c.hub.changed(o.GetName())
		case *v1beta2.Manifest:
			c.hub.changed(o.GetLabels()[v1beta2.KymaNameLabel])
		default:
			c.hub.changed("")
		}
	}
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("Referrer-Policy", "no-referrer")
	c.mux.ServeHTTP(w, r)
}

func parsePages() (map[string]*template.Template, error) {
	static, err := fs.Sub(web, "web")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"fleet", "runtime", "module", "rollouts", "rollout", "backups", "error"} {
		t, err := template.ParseFS(static, "layout.html", name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}
