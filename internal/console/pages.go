package console

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func metav1ObjectMeta(o client.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: o.GetName(), Namespace: o.GetNamespace(), Labels: o.GetLabels(), UID: o.GetUID(), ResourceVersion: o.GetResourceVersion()}
}

func (c *Console) routes() {
	static, _ := fs.Sub(web, "web")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /{$}", c.page("fleet", "kymas", c.fleetPage))
	mux.HandleFunc("GET /runtimes/{name}", c.page("runtime", "kymas", c.runtimePage))
	mux.HandleFunc("GET /modules/{name}", c.page("module", "kymas", c.modulePage))
	mux.HandleFunc("GET /rollouts", c.page("rollouts", "modulerollouts", c.rolloutsPage))
	mux.HandleFunc("GET /rollouts/{name}", c.page("rollout", "modulerollouts", c.rolloutPage))
	mux.HandleFunc("GET /backups", c.page("backups", "runtimebackups", c.backupsPage))
	mux.HandleFunc("GET /fragments/row/{name}", c.fragment("kymas", c.rowFragment))
	mux.HandleFunc("GET /fragments/counts", c.fragment("kymas", c.countsFragment))
	mux.HandleFunc("GET /events", c.events)
	c.mux = mux
}

// errNotFound answers 404 with its message.
type errNotFound string

func (e errNotFound) Error() string { return string(e) }

// view is what the layout renders around a page's data.
type view struct {
	Title, Page, Viewer, Namespace string
	States                         []v1beta2.State
	// Nav has the views the viewer may see beyond the fleet's: a link to
	// one they may not would only lead to a 403.
	Nav  map[string]bool
	Data any
}

// navViews are the links of the header, by the resource each view needs.
var navViews = []string{"modulerollouts", "runtimebackups"}

// nav asks Access which of the header's views the viewer may see; one it
// cannot say is left out.
func (c *Console) nav(ctx context.Context, v Viewer) map[string]bool {
	allowed := map[string]bool{}
	for _, resource := range navViews {
		ok, err := c.opts.Access.CanList(ctx, v, resource, c.opts.Namespace)
		allowed[resource] = ok && err == nil
	}
	return allowed
}

// admit authenticates the request and asks whether the viewer may list
// resource; it answers the request itself when not.
func (c *Console) admit(w http.ResponseWriter, r *http.Request, resource string) (Viewer, bool) {
	if local, ok := c.opts.Authenticator.(*LocalAuthenticator); ok && local.hostAllowed(r.Host) && local.setCookie(w, r) {
		return Viewer{}, false
	}
	v, err := c.opts.Authenticator.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lifecycle-manager-console"`)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return v, false
	}
	allowed, err := c.opts.Access.CanList(r.Context(), v, resource, c.opts.Namespace)
	if err != nil {
		http.Error(w, "The API server could not say what you may see; try again.", http.StatusServiceUnavailable)
		return v, false
	}
	if !allowed {
		http.Error(w, fmt.Sprintf("%s may not list %s in namespace %s: ask for a RoleBinding that allows it.", v.Name, resource, c.opts.Namespace), http.StatusForbidden)
		return v, false
	}
	if !c.synced.Load() {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "The console is still reading the fleet; try again in a moment.", http.StatusServiceUnavailable)
		return v, false
	}
	return v, true
}

// page serves a page the viewer may see when they may list resource.
func (c *Console) page(name, resource string, data func(*http.Request, Viewer) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := c.admit(w, r, resource)
		if !ok {
			return
		}
		title, d, err := data(r, v)
		status := http.StatusOK
		if err != nil {
			name, title, d, status = "error", "Not found", err.Error(), http.StatusNotFound
			if _, nf := errors.AsType[errNotFound](err); !nf {
				title, status = "Something went wrong", http.StatusInternalServerError
				log.Printf("console: %s: %v", r.URL.Path, err)
				d = "The console could not read what this page shows; the log says why."
			}
		}
		c.render(w, status, name, "layout", view{Title: title, Page: name, Viewer: v.Name, Namespace: c.opts.Namespace, States: states, Nav: c.nav(r.Context(), v), Data: d})
	}
}

// fragment serves a piece of a page for the live updates.
func (c *Console) fragment(resource string, data func(*http.Request) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := c.admit(w, r, resource); !ok {
			return
		}
		tmpl, d, err := data(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		c.render(w, http.StatusOK, "fleet", tmpl, d)
	}
}

func (c *Console) render(w http.ResponseWriter, status int, page, tmpl string, data any) {
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, tmpl, data); err != nil {
		log.Printf("console: rendering %s: %v", page, err)
		http.Error(w, "The page could not be rendered.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// kymas are the namespace's Kymas, read from the cache without a copy:
// nothing here writes to them.
func (c *Console) kymas(r *http.Request) ([]*v1beta2.Kyma, error) {
	list := &v1beta2.KymaList{}
	if err := c.cache.List(r.Context(), list, client.InNamespace(c.opts.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*v1beta2.Kyma, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (c *Console) kyma(r *http.Request, name string) (*v1beta2.Kyma, error) {
	k := &v1beta2.Kyma{}
	if err := c.cache.Get(r.Context(), client.ObjectKey{Namespace: c.opts.Namespace, Name: name}, k); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errNotFound(fmt.Sprintf("No runtime (Kyma) %q in namespace %s.", name, c.opts.Namespace))
		}
		return nil, err
	}
	return k, nil
}

// fleetData is the fleet page's data.
type fleetData struct {
	Fleet      Fleet
	Filter     Filter
	Error      string
	Prev, Next string
}

func filterOf(q url.Values) Filter {
	return Filter{State: q.Get("state"), Module: q.Get("module"), Version: q.Get("version"), Label: q.Get("label"),
		Shard: q.Get("shard"), Paused: q.Get("paused"), Window: q.Get("window") != "", Text: q.Get("q")}
}

func (c *Console) fleetPage(r *http.Request, _ Viewer) (string, any, error) {
	q := r.URL.Query()
	f := filterOf(q)
	page, _ := strconv.Atoi(q.Get("page"))
	d := fleetData{Filter: f}
	var err error
	d.Fleet, err = c.model.fleet(f, page, c.opts.Now())
	if err != nil {
		// A label selector that does not parse: say so, list nothing.
		d.Error = fmt.Sprintf("The label filter %q is not a label selector: %v", f.Label, err)
		d.Fleet, _ = c.model.fleet(Filter{State: noState}, 1, c.opts.Now())
	}
	at := func(p int) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		return "/?" + q.Encode()
	}
	d.Prev, d.Next = at(d.Fleet.Page-1), at(d.Fleet.Page+1)
	return "Fleet", d, nil
}

// noState selects no runtime: the counts without rows.
const noState = "\x00"

func (c *Console) rowFragment(r *http.Request) (string, any, error) {
	name := r.PathValue("name")
	row, ok := c.model.row(name, c.opts.Now())
	if !ok {
		return "", nil, errNotFound(fmt.Sprintf("No runtime (Kyma) %q in namespace %s.", name, c.opts.Namespace))
	}
	return "row", row, nil
}

func (c *Console) countsFragment(*http.Request) (string, any, error) {
	fl, err := c.model.fleet(Filter{State: noState}, 1, c.opts.Now())
	return "counts", fl, err
}

// runtimeData is the runtime page's data.
type runtimeData struct {
	Row Row
	// Liveness says what the console knows of the runtime being alive.
	Liveness    string
	Conditions  []conditionView
	History     []operationView
	HistoryNote string
}

type conditionView struct{ Type, Status, Reason, Since, Message string }

type operationView struct {
	Module, Type, From, To, Result, Code, Started, Finished string
	at                                                      time.Time
}

func (c *Console) runtimePage(r *http.Request, v Viewer) (string, any, error) {
	k, err := c.kyma(r, r.PathValue("name"))
	if err != nil {
		return "", nil, err
	}
	now := c.opts.Now()
	d := runtimeData{Row: rowOf(k, now), Liveness: livenessOf(k, now)}
	for _, cond := range k.Status.Conditions {
		d.Conditions = append(d.Conditions, conditionView{Type: cond.Type, Status: string(cond.Status), Reason: cond.Reason,
			Since: cond.LastTransitionTime.UTC().Format(time.RFC3339) + " (" + age(now, cond.LastTransitionTime.Time) + " ago)", Message: cond.Message})
	}
	// The history needs the right to list Manifests too.
	if ok, err := c.opts.Access.CanList(r.Context(), v, "manifests", c.opts.Namespace); err != nil || !ok {
		d.HistoryNote = "Your rights do not show the runtime's Manifests, which hold its history."
		return "Runtime " + k.Name, d, nil
	}
	manifests := &v1beta2.ManifestList{}
	if err := c.cache.List(r.Context(), manifests, client.InNamespace(c.opts.Namespace), client.MatchingLabels{v1beta2.KymaNameLabel: k.Name}); err != nil {
		return "", nil, err
	}
	for _, m := range manifests.Items {
		for _, op := range m.Status.Operations {
			ov := operationView{Module: cmp.Or(op.Module, m.Labels[v1beta2.ModuleNameLabel]), Type: string(op.Type), From: op.FromVersion, To: op.ToVersion,
				Result: string(op.Result), Code: op.Code, Started: op.StartedAt.UTC().Format(time.RFC3339), at: op.StartedAt.Time}
			if op.FinishedAt != nil {
				ov.Finished = op.FinishedAt.UTC().Format(time.RFC3339)
			}
			d.History = append(d.History, ov)
		}
	}
	slices.SortFunc(d.History, func(a, b operationView) int { return b.at.Compare(a.at) })
	if len(d.History) == 0 {
		d.HistoryNote = "No operations recorded yet."
	}
	return "Runtime " + k.Name, d, nil
}
