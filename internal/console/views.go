package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// moduleData is the module page's data.
type moduleData struct {
	Name      string
	Channels  []v1beta2.ChannelVersionAssignment
	Versions  []string
	Installed []versionCount
}

type versionCount struct {
	Version string
	N       int
	// Names are the first runtimes at the version, by name; the fleet
	// page filtered by the version lists them all.
	Names []string
}

// namedPerVersion bounds the runtimes the module page names per version.
const namedPerVersion = 20

func (c *Console) modulePage(r *http.Request, _ Viewer) (string, any, error) {
	name := r.PathValue("name")
	d := moduleData{Name: name}
	metas := &v1beta2.ModuleReleaseMetaList{}
	if err := c.cache.List(r.Context(), metas, client.InNamespace(c.opts.Namespace)); err != nil {
		return "", nil, err
	}
	for _, m := range metas.Items {
		if m.Spec.ModuleName == name {
			d.Channels = append(d.Channels, m.Spec.Channels...)
		}
	}
	templates := &v1beta2.ModuleTemplateList{}
	if err := c.cache.List(r.Context(), templates, client.InNamespace(c.opts.Namespace)); err != nil {
		return "", nil, err
	}
	for _, t := range templates.Items {
		if t.Spec.ModuleName == name && t.Spec.Version != "" && !slices.Contains(d.Versions, t.Spec.Version) {
			d.Versions = append(d.Versions, t.Spec.Version)
		}
	}
	slices.Sort(d.Versions)
	kymas, err := c.kymas(r)
	if err != nil {
		return "", nil, err
	}
	counts := map[string]*versionCount{}
	for _, k := range kymas {
		for _, m := range k.Status.Modules {
			if m.Name != name {
				continue
			}
			vc := counts[m.Version]
			if vc == nil {
				vc = &versionCount{Version: m.Version}
				counts[m.Version] = vc
			}
			vc.N++
			vc.Names = append(vc.Names, k.Name)
		}
	}
	if len(d.Channels) == 0 && len(d.Versions) == 0 && len(counts) == 0 {
		return "", nil, errNotFound(fmt.Sprintf("No module %q in the catalog or in any runtime of namespace %s.", name, c.opts.Namespace))
	}
	for _, vc := range counts {
		slices.Sort(vc.Names)
		vc.Names = vc.Names[:min(len(vc.Names), namedPerVersion)]
		d.Installed = append(d.Installed, *vc)
	}
	slices.SortFunc(d.Installed, func(a, b versionCount) int { return cmp.Compare(a.Version, b.Version) })
	return "Module " + name, d, nil
}

// rolloutView is one ModuleRollout.
type rolloutView struct {
	Name, Module, Channel, Phase, From, To, Halt, InWave string
	Wave                                                 int32
	Done, Failed, Pending, Total                         int32
	InFlight, WaveMembers, DoneNamed                     []string
	FailedNamed, PendingNamed                            []v1beta2.RolloutRuntime
}

func rolloutOf(ro *v1beta2.ModuleRollout, now time.Time) rolloutView {
	s := ro.Status
	v := rolloutView{Name: ro.Name, Module: ro.Spec.ModuleName, Channel: cmp.Or(ro.Spec.Channel, "(mandatory)"), Phase: string(s.Phase),
		From: s.FromVersion, To: s.ToVersion, Halt: s.HaltReason, Wave: s.Wave, Done: s.Done, Failed: s.FailedCount, Pending: s.Pending, Total: s.Total,
		InFlight: s.InFlight, WaveMembers: s.WaveMembers, DoneNamed: s.Runtimes.Done, FailedNamed: s.Runtimes.Failed, PendingNamed: s.Runtimes.Pending}
	if s.WaveStartedAt != nil && s.Phase != v1beta2.RolloutCompleted {
		v.InWave = age(now, s.WaveStartedAt.Time)
	}
	return v
}

func (c *Console) rolloutsPage(r *http.Request, _ Viewer) (string, any, error) {
	list := &v1beta2.ModuleRolloutList{}
	if err := c.cache.List(r.Context(), list, client.InNamespace(c.opts.Namespace)); err != nil {
		return "", nil, err
	}
	var out struct{ Rollouts []rolloutView }
	for i := range list.Items {
		out.Rollouts = append(out.Rollouts, rolloutOf(&list.Items[i], c.opts.Now()))
	}
	slices.SortFunc(out.Rollouts, func(a, b rolloutView) int { return cmp.Compare(a.Name, b.Name) })
	return "Rollouts", out, nil
}

func (c *Console) rolloutPage(r *http.Request, _ Viewer) (string, any, error) {
	ro := &v1beta2.ModuleRollout{}
	name := r.PathValue("name")
	if err := c.cache.Get(r.Context(), client.ObjectKey{Namespace: c.opts.Namespace, Name: name}, ro); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil, errNotFound(fmt.Sprintf("No ModuleRollout %q in namespace %s.", name, c.opts.Namespace))
		}
		return "", nil, err
	}
	return "Rollout " + name, rolloutOf(ro, c.opts.Now()), nil
}

// backupView is one runtime's backups.
type backupView struct {
	Name, Schedule, Last, Next, Why string
	Count                           int32
	Stale                           bool
}

// staleAfter is how far past its due time a backup may be before the
// console calls the runtime's backups stale; the alert
// LifecycleManagerBackupsStale judges by the schedule's interval, which
// the console does not know.
const staleAfter = time.Hour

func (c *Console) backupsPage(r *http.Request, _ Viewer) (string, any, error) {
	list := &v1beta2.RuntimeBackupList{}
	if err := c.cache.List(r.Context(), list, client.InNamespace(c.opts.Namespace)); err != nil {
		return "", nil, err
	}
	now := c.opts.Now()
	var out struct {
		Backups []backupView
		Stale   int
	}
	for _, rb := range list.Items {
		s := rb.Status
		v := backupView{Name: rb.Name, Schedule: s.Schedule, Count: s.Count, Last: "never", Next: "-"}
		if s.LastSuccessfulTime != nil {
			v.Last = s.LastSuccessfulTime.UTC().Format(time.RFC3339) + " (" + age(now, s.LastSuccessfulTime.Time) + " ago)"
		}
		if s.NextScheduleTime != nil {
			v.Next = s.NextScheduleTime.UTC().Format(time.RFC3339)
		}
		switch {
		case s.LastError != "":
			v.Stale, v.Why = true, s.LastError
		case s.NextScheduleTime != nil && now.Sub(s.NextScheduleTime.Time) > staleAfter:
			v.Stale, v.Why = true, "due for "+age(now, s.NextScheduleTime.Time)
		}
		if v.Stale {
			out.Stale++
		}
		out.Backups = append(out.Backups, v)
	}
	slices.SortFunc(out.Backups, func(a, b backupView) int { return cmp.Compare(a.Name, b.Name) })
	return "Backups", out, nil
}

// events streams what changed (server-sent events) to a viewer who may
// list Kymas: "runtime" with a Kyma's name, "fleet" when counts or the
// other pages may have changed, "all" when too much changed to name.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.admit(w, r, "kymas"); !ok {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	v := c.hub.subscribe()
	defer c.hub.unsubscribe(v)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": connected\n\n")
	flusher.Flush()
	keepAlive := time.NewTicker(30 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepAlive.C:
			_, _ = fmt.Fprint(w, ": keep-alive\n\n")
		case <-v.wake:
			runtimes, all, fleet := v.take()
			if all {
				_, _ = fmt.Fprint(w, "event: all\ndata: \n\n")
			}
			for _, name := range runtimes {
				_, _ = fmt.Fprintf(w, "event: runtime\ndata: %s\n\n", name)
			}
			if fleet {
				_, _ = fmt.Fprint(w, "event: fleet\ndata: \n\n")
			}
		}
		flusher.Flush()
	}
}
