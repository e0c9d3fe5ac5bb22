package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log"
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
	pages map[string]*template.Template
	mux   *http.ServeMux
	// synced is set once every kind was listed.
	synced atomic.Bool
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
		// A Manifest is kept for its operation history alone: its spec
		// and the rest of its status are the larger part of it. (A
		// transform by type, not per object: a per-object option asks the
		// API server for the kind's mapping here, and the console must
		// start, answer its probes and refuse strangers before the CRDs
		// exist.)
		DefaultTransform: trimManifest,
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

// trimManifest keeps what the runtime page shows of a Manifest, and drops
// every object's managedFields.
func trimManifest(obj any) (any, error) {
	m, ok := obj.(*v1beta2.Manifest)
	if !ok {
		return cache.TransformStripManagedFields()(obj)
	}
	return &v1beta2.Manifest{
		TypeMeta:   m.TypeMeta,
		ObjectMeta: metav1ObjectMeta(m),
		Status:     v1beta2.ManifestStatus{Operations: m.Status.Operations},
	}, nil
}

// Start runs the informers until ctx ends, telling the open pages of every
// change. Kinds the API server does not serve yet (the CRDs not installed)
// are asked for again every few seconds; until every kind is listed, pages
// answer 503.
func (c *Console) Start(ctx context.Context) error {
	watched := map[int]bool{}
	// handlersSynced say when the handlers have had every object of the
	// first lists: the model is complete only then, after the cache.
	var handlersSynced []toolscache.InformerSynced
	for len(watched) < len(kinds) {
		var err error
		for i, k := range kinds {
			if !watched[i] {
				var synced toolscache.InformerSynced
				if synced, err = c.watch(ctx, k.obj); err != nil {
					break
				}
				watched[i] = true
				handlersSynced = append(handlersSynced, synced)
			}
		}
		if err == nil {
			break
		}
		log.Printf("console: waiting for the API server to serve the console's kinds: %v", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retryWatch):
		}
	}
	go func() {
		if c.cache.WaitForCacheSync(ctx) && toolscache.WaitForCacheSync(ctx.Done(), handlersSynced...) {
			c.synced.Store(true)
		}
	}()
	return c.cache.Start(ctx)
}

// retryWatch is how long the console waits before it asks again for a
// kind the API server did not serve.
const retryWatch = 5 * time.Second

// watch runs kind's informer with the console's handler; it returns when
// the handler has had the first list.
func (c *Console) watch(ctx context.Context, obj client.Object) (toolscache.InformerSynced, error) {
	informer, err := c.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	notify := c.notifier(obj)
	registration, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { notify(obj, false) },
		UpdateFunc: func(_, obj any) { notify(obj, false) },
		DeleteFunc: func(obj any) { notify(obj, true) },
	})
	if err != nil {
		return nil, err
	}
	return registration.HasSynced, nil
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
