package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/apply"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
)

// Action is what a restore did with one object.
type Action string

// Actions of a restore. It creates what is missing and never overwrites
// what the new runtime has, with two exceptions that are updated: the
// Kymas, which the new registration and the operator create and the
// restore adds the backup's choices to, and a module's default custom
// resource the operator has just created and nobody has changed since.
const (
	Created Action = "created"
	Updated Action = "updated"
	Skipped Action = "skipped"
	Failed  Action = "failed"
)

// ErrIncomplete is the cause of a restore's error when it ran through but
// some objects failed; the Result says which and why.
var ErrIncomplete = errors.New("some objects were not restored")

// ObjectResult is what a restore did with one object, and why.
type ObjectResult struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Module is the module whose CRD a custom resource is of.
	Module string `json:"module,omitempty"`
	Action Action `json:"action"`
	Reason string `json:"reason,omitempty"`
}

// Failed counts the objects that failed.
func (r Result) Failed() int {
	n := 0
	for _, o := range r.Objects {
		if o.Action == Failed {
			n++
		}
	}
	return n
}

// WriteTable prints the result for people: an object per line.
func (r Result) WriteTable(w io.Writer) error {
	tw := output.NewTabWriter(w)
	fmt.Fprintln(tw, "OBJECT\tMODULE\tRESULT\tREASON")
	for _, o := range r.Objects {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", describe(o.Kind, o.Namespace, o.Name), o.Module, o.Action, o.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "Restored backup %s (format %d) of Kyma %s: %s\n", r.Backup, r.Format, r.Kyma, r.summary())
	return err
}

func (r Result) summary() string {
	counts := map[Action]int{}
	for _, o := range r.Objects {
		counts[o.Action]++
	}
	var parts []string
	for _, a := range []Action{Created, Updated, Skipped, Failed} {
		parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
	}
	return strings.Join(parts, ", ")
}

func describe(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// runtimeRestore restores a snapshot's runtime side, in dependency order:
// the runtime's own Kyma (its modules bring the CRDs), the Namespaces the
// objects live in, the Secrets, then the custom resources, each kind once
// the runtime serves it. An object that fails is reported and the rest go
// on: a restore that stopped at the first failure would leave more
// missing than it had to.
type runtimeRestore struct {
	rt       client.Client
	cfg      *rest.Config
	progress io.Writer
	// deadline bounds the waits for the runtime's Kyma and the CRDs.
	deadline time.Time
	res      *Result
}

func (r *runtimeRestore) run(ctx context.Context, s *backup.Snapshot, runtimeKyma client.ObjectKey) {
	if s.RuntimeKyma != nil {
		r.runtimeKyma(ctx, runtimeKyma, s.RuntimeKyma)
	}
	r.namespaces(ctx, s)
	for i := range s.Secrets {
		secret := s.Secrets[i].DeepCopy()
		r.create(ctx, secret, "Secret", "")
	}
	served := map[schema.GroupVersionKind]error{}
	for _, res := range s.Resources {
		gvk := res.Object.GroupVersionKind()
		err, known := served[gvk]
		if !known {
			fmt.Fprintf(r.progress, "Waiting until the runtime serves %s\n", gvk.GroupKind())
			err = r.waitForKind(ctx, gvk)
			served[gvk] = err
		}
		if err != nil {
			r.report(res.Object.GetKind(), res.Object.GetNamespace(), res.Object.GetName(), res.Module, Failed, err.Error())
			continue
		}
		r.customResource(ctx, res)
	}
}

func (r *runtimeRestore) report(kind, namespace, name, module string, action Action, reason string) {
	r.res.Objects = append(r.res.Objects, ObjectResult{Kind: kind, Namespace: namespace, Name: name, Module: module, Action: action, Reason: reason})
}

// waitCtx bounds a wait by the restore's deadline.
func (r *runtimeRestore) waitCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, r.deadline)
}

// runtimeKyma adds the owner's choices to the runtime's own Kyma once the
// operator has created it: the modules (a module listed already keeps its
// entry), the channel, skipMaintenanceWindows and debug, and the labels
// and annotations it does not have. Its sync namespace is the new
// registration's.
func (r *runtimeRestore) runtimeKyma(ctx context.Context, key client.ObjectKey, want *backup.RuntimeKyma) {
	fmt.Fprintf(r.progress, "Waiting for the runtime's Kyma %s\n", key)
	wctx, cancel := r.waitCtx(ctx)
	defer cancel()
	var changed []string
	err := wait.PollUntilContextCancel(wctx, time.Second, true, func(ctx context.Context) (bool, error) {
		k := &v1beta2.Kyma{}
		if err := r.rt.Get(ctx, key, k); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				return false, nil
			}
			return false, fmt.Errorf("reading it: %w", err)
		}
		patch := client.MergeFromWithOptions(k.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if changed = addRuntimeChoices(k, want); len(changed) == 0 {
			return true, nil
		}
		if err := r.rt.Patch(ctx, k, patch); err != nil {
			if apierrors.IsConflict(err) {
				return false, nil
			}
			return false, err
		}
		return true, nil
	})
	switch {
	case wait.Interrupted(err):
		r.report("Kyma", key.Namespace, key.Name, "", Failed, "the operator has not created it yet: is the runtime registered and reachable?")
	case err != nil:
		r.report("Kyma", key.Namespace, key.Name, "", Failed, err.Error())
	case len(changed) == 0:
		r.report("Kyma", key.Namespace, key.Name, "", Skipped, "it holds the backup's choices already")
	default:
		r.report("Kyma", key.Namespace, key.Name, "", Updated, strings.Join(changed, "; "))
	}
}

// addRuntimeChoices adds the backup's choices to the runtime's Kyma and
// says what it changed.
func addRuntimeChoices(k *v1beta2.Kyma, want *backup.RuntimeKyma) []string {
	var changed []string
	var added []string
	for _, m := range want.Spec.Modules {
		if !slices.ContainsFunc(k.Spec.Modules, func(l v1beta2.Module) bool { return l.Name == m.Name }) {
			added = append(added, m.Name)
		}
	}
	if len(added) > 0 {
		k.Spec.Modules = mergeModules(k.Spec.Modules, want.Spec.Modules)
		changed = append(changed, "modules "+strings.Join(added, ", "))
	}
	if want.Spec.Channel != "" && k.Spec.Channel != want.Spec.Channel {
		k.Spec.Channel = want.Spec.Channel
		changed = append(changed, "channel "+want.Spec.Channel)
	}
	if want.Spec.SkipMaintenanceWindows && !k.Spec.SkipMaintenanceWindows {
		k.Spec.SkipMaintenanceWindows = true
		changed = append(changed, "skipMaintenanceWindows")
	}
	if want.Spec.Debug != nil && (k.Spec.Debug == nil || *k.Spec.Debug != *want.Spec.Debug) {
		k.Spec.Debug = new(*want.Spec.Debug)
		changed = append(changed, fmt.Sprintf("debug %t", *want.Spec.Debug))
	}
	if keys := addMissing(&k.Labels, want.Labels); len(keys) > 0 {
		changed = append(changed, "labels "+strings.Join(keys, ", "))
	}
	if keys := addMissing(&k.Annotations, want.Annotations); len(keys) > 0 {
		changed = append(changed, "annotations "+strings.Join(keys, ", "))
	}
	return changed
}

// addMissing adds the entries of want that m lacks and returns their keys,
// sorted; an entry m has keeps its value.
func addMissing(m *map[string]string, want map[string]string) []string {
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := (*m)[k]; ok {
			continue
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[k] = want[k]
		keys = append(keys, k)
	}
	return keys
}

// namespaces creates the Namespaces the backup's objects live in that the
// runtime lacks.
func (r *runtimeRestore) namespaces(ctx context.Context, s *backup.Snapshot) {
	needed := map[string]bool{}
	for _, secret := range s.Secrets {
		needed[secret.Namespace] = true
	}
	for _, res := range s.Resources {
		if ns := res.Object.GetNamespace(); ns != "" {
			needed[ns] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(needed)) {
		r.create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, "Namespace", "")
	}
}

// create creates obj, or reports that it exists and leaves it as it is.
func (r *runtimeRestore) create(ctx context.Context, obj client.Object, kind, module string) {
	err := r.rt.Create(ctx, obj, client.FieldOwner(FieldManager))
	switch {
	case err == nil:
		r.report(kind, obj.GetNamespace(), obj.GetName(), module, Created, "")
	case apierrors.IsAlreadyExists(err):
		r.report(kind, obj.GetNamespace(), obj.GetName(), module, Skipped, "exists")
	default:
		r.report(kind, obj.GetNamespace(), obj.GetName(), module, Failed, err.Error())
	}
}

// customResource creates a custom resource. A module's default custom
// resource that exists is replaced while it is the operator's untouched
// copy of the module's default: the module was installed moments ago by
// this restore, and the owner's spec is the one to have. Once anyone but
// the operator has written it, it is left alone.
func (r *runtimeRestore) customResource(ctx context.Context, res backup.Resource) {
	obj := res.Object.DeepCopy()
	kind, namespace, name := obj.GetKind(), obj.GetNamespace(), obj.GetName()
	err := r.rt.Create(ctx, obj, client.FieldOwner(FieldManager))
	switch {
	case err == nil:
		r.report(kind, namespace, name, res.Module, Created, "")
		return
	case !apierrors.IsAlreadyExists(err):
		r.report(kind, namespace, name, res.Module, Failed, err.Error())
		return
	case !res.Default:
		r.report(kind, namespace, name, res.Module, Skipped, "exists")
		return
	}
	replaced := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(res.Object.GroupVersionKind())
		if err := r.rt.Get(ctx, client.ObjectKeyFromObject(res.Object), live); err != nil {
			return err
		}
		if !untouchedDefault(live) {
			return nil
		}
		obj := res.Object.DeepCopy()
		obj.SetResourceVersion(live.GetResourceVersion())
		if err := r.rt.Update(ctx, obj, client.FieldOwner(FieldManager)); err != nil {
			return err
		}
		replaced = true
		return nil
	})
	switch {
	case err != nil:
		r.report(kind, namespace, name, res.Module, Failed, err.Error())
	case replaced:
		r.report(kind, namespace, name, res.Module, Updated, "replaced the module's default, which nobody had changed, with the backed-up one")
	default:
		r.report(kind, namespace, name, res.Module, Skipped, "exists, changed since the operator created it")
	}
}

// untouchedDefault says whether only the operator has written obj's
// content: every field manager but those of the status subresource is
// one of the operator's. Without managed fields nothing can be told, and
// the object is left alone.
func untouchedDefault(obj *unstructured.Unstructured) bool {
	fields := obj.GetManagedFields()
	if len(fields) == 0 {
		return false
	}
	for _, f := range fields {
		if f.Subresource != "" {
			continue
		}
		if f.Manager != apply.FieldManager && f.Manager != apply.OwnershipFieldManager {
			return false
		}
	}
	return true
}
