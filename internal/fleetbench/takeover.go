package fleetbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	kymactrl "github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// The takeover phase (--takeover, issue 35): the fleet is written as the
// Kyma lifecycle-manager (KLM) leaves it before the operator starts — each
// Kyma with KLM's finalizers, each module with KLM's Manifest
// (`<kyma>-<module>-<fnv32>`, its finalizer, its status.synced) and its
// objects applied under KLM's field manager with KLM's marks — and the
// operator, started with --klm-takeover=all, takes it over. The phase ends
// when every Kyma is Ready at the installed version, every Manifest
// recorded status.takenOver and none of KLM's Manifests is left; the report
// then says how many module objects changed anything but metadata (the
// spec or data of what a runtime runs: it must be none).

const phaseTakeover = "takeover"

// benchModuleKind is the custom resource every bench module ships.
var benchModuleKind = schema.GroupVersionKind{Group: benchGroup, Version: "v1", Kind: "BenchModule"}

// TakeoverCheck is what the takeover left, checked once the phase ended.
type TakeoverCheck struct {
	// KLMWriteSeconds is how long writing KLM's fleet took (before the
	// operator started; not part of the phase).
	KLMWriteSeconds float64 `json:"klmWriteSeconds"`
	// KLMWrites are the writes that made KLM's fleet.
	KLMWrites int64 `json:"klmWrites"`
	// KymasReadySeconds is when, after the phase began, the last Kyma was
	// Ready; the phase ends later, when the last of KLM's Manifests is
	// gone and every Manifest recorded its takeover.
	KymasReadySeconds float64 `json:"kymasReadySeconds"`
	// TakenOver counts the Manifests that recorded status.takenOver;
	// KLMManifestsLeft those of KLM still there.
	TakenOver        int `json:"takenOver"`
	KLMManifestsLeft int `json:"klmManifestsLeft"`
	// RuntimeKymasLeft counts the runtimes' Kymas still carrying KLM's
	// mark or one of its field managers.
	RuntimeKymasLeft int `json:"runtimeKymasLeft"`
	// ModuleObjects are the module objects compared, in every runtime;
	// Recreated those with a new UID, SpecChanged those whose generation
	// or data changed: both must be 0. The bench modules run no workload
	// (a ConfigMap and a custom resource each), so every module object is
	// compared.
	ModuleObjects int `json:"moduleObjects"`
	Recreated     int `json:"recreated"`
	SpecChanged   int `json:"specChanged"`
	// ModuleObjectWrites are the phase's writes to module objects by
	// resource (configmaps, benchmodules): metadata only (field managers
	// moved, this operator's marks), as SpecChanged shows.
	ModuleObjectWrites map[string]float64 `json:"moduleObjectWrites,omitempty"`
}

// moduleObjectState is what must not change of a module object.
type moduleObjectState struct {
	uid        string
	generation int64
	data       string
}

// runtimeClients are clients of every runtime API server, without rate
// limits.
func (b *bench) runtimeClients() ([]client.Client, error) {
	out := make([]client.Client, len(b.runtimes))
	for i, rt := range b.runtimes {
		c, err := client.New(withLimits(rt.Config(), -1, 0), client.Options{Scheme: b.client.Scheme()})
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// writeKLMFleet writes every Kyma as KLM leaves it, concurrency at a time,
// and returns the state of every module object, to compare afterwards,
// and the writes it took.
func (b *bench) writeKLMFleet(ctx context.Context, kubeconfigs [][]byte) (map[string]moduleObjectState, int64, error) {
	// The runtime's Kyma needs the runtime CRDs, which KLM installed.
	if err := b.installRuntimeCRDs(ctx); err != nil {
		return nil, 0, err
	}
	// Clients made after the CRDs are served find them in their mapping.
	runtimeClients, err := b.runtimeClients()
	if err != nil {
		return nil, 0, err
	}
	var written atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(b.opts.CreateConcurrency)
	for i := range b.opts.Kymas {
		g.Go(func() error {
			return b.writeKLMKyma(gctx, i, kubeconfigs, runtimeClients[i%len(runtimeClients)], &written)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, written.Load(), err
	}
	fmt.Fprintf(b.opts.Progress, "takeover: wrote KLM's fleet (%d writes)\n", written.Load())
	objects, err := moduleObjects(ctx, runtimeClients, b.opts.Kymas, b.modules)
	return objects, written.Load(), err
}

// installRuntimeCRDs applies the runtime CRDs (Kyma, ModuleTemplate,
// ModuleReleaseMeta) to every runtime API server, as the e2e fixture of
// KLM's runtime does, and waits until they are served.
func (b *bench) installRuntimeCRDs(ctx context.Context) error {
	runtimeClients, err := b.runtimeClients()
	if err != nil {
		return err
	}
	for _, rc := range runtimeClients {
		for _, name := range kymactrl.RuntimeCRDs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := b.client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return fmt.Errorf("reading CRD %s: %w", name, err)
			}
			u, err := kymactrl.RuntimeCRD(ctx, rc, crd)
			if err != nil {
				return err
			}
			if err := rc.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("lifecycle-manager"), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying CRD %s to a runtime: %w", name, err)
			}
		}
	}
	for _, rc := range runtimeClients {
		for _, name := range kymactrl.RuntimeCRDs {
			for {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := rc.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
					return err
				}
				if established(crd) {
					break
				}
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// writeKLMKyma writes one Kyma as KLM leaves it: in the control plane the
// Kyma with KLM's finalizers and a Manifest per module with status.synced;
// in the runtime the sync namespace, the runtime's Kyma and every module's
// objects applied by KLM's applier with KLM's marks.
func (b *bench) writeKLMKyma(ctx context.Context, i int, kubeconfigs [][]byte, rc client.Client, written *atomic.Int64) error {
	secret, kyma := kymaObjects(i, namespace, kubeconfigs, b.modules)
	kyma.Finalizers = append([]string(nil), takeover.KymaFinalizers...)
	kyma.Labels[v1beta2.ManagedByLabel] = v1beta2.ManagedByValue
	for _, obj := range []client.Object{secret, kyma} {
		if err := b.client.Create(ctx, obj); err != nil {
			return fmt.Errorf("writing KLM's Kyma %s: %w", kyma.Name, err)
		}
		written.Add(1)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kyma.Name, Labels: map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue}}}
	if err := rc.Create(ctx, ns, client.FieldOwner(takeover.SyncContextManager)); err != nil {
		return fmt.Errorf("writing KLM's sync namespace %s: %w", kyma.Name, err)
	}
	written.Add(1)
	n, err := writeKLMRuntimeKyma(ctx, rc, kyma)
	written.Add(n)
	if err != nil {
		return err
	}
	controller := true
	owner := metav1.OwnerReference{APIVersion: v1beta2.GroupVersion.String(), Kind: "Kyma", Name: kyma.Name, UID: kyma.UID, Controller: &controller}
	for _, module := range b.modules {
		name := takeover.ManifestName(kyma.Name, module)
		var synced []v1beta2.Resource
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(moduleManifest(module, installVersion)), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return err
			}
			u.SetNamespace(kyma.Name)
			u.SetLabels(map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue, "app.kubernetes.io/component": name, "app.kubernetes.io/part-of": "Kyma"})
			u.SetAnnotations(map[string]string{takeover.DeprecatedOwnedByAnnotation: namespace + "/" + name})
			if err := rc.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(takeover.ApplierManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying %s as KLM: %w", u.GetName(), err)
			}
			written.Add(1)
			gvk := u.GroupVersionKind()
			synced = append(synced, v1beta2.Resource{GroupVersionKind: metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
				Namespace: u.GetNamespace(), Name: u.GetName()})
		}
		m := &v1beta2.Manifest{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: namespace, Finalizers: []string{takeover.ManifestFinalizer}, OwnerReferences: []metav1.OwnerReference{owner},
				Labels: map[string]string{v1beta2.KymaNameLabel: kyma.Name, v1beta2.ModuleNameLabel: module, v1beta2.ManagedByLabel: v1beta2.ManagedByValue},
			},
			Spec: v1beta2.ManifestSpec{Remote: true, Version: installVersion},
		}
		if err := b.client.Create(ctx, m); err != nil {
			return fmt.Errorf("writing KLM's Manifest %s: %w", name, err)
		}
		m.Status = v1beta2.ManifestStatus{State: v1beta2.StateReady, Synced: synced}
		if err := b.client.Status().Update(ctx, m); err != nil {
			return fmt.Errorf("writing KLM's Manifest %s's status: %w", name, err)
		}
		written.Add(2)
	}
	return nil
}

// writeKLMRuntimeKyma writes the runtime's Kyma (default, in the Kyma's
// sync namespace) as KLM leaves it: created and its status written by the
// user agent "manager", its labels applied by kyma-sync-context. It
// returns the writes made.
func writeKLMRuntimeKyma(ctx context.Context, rc client.Client, kyma *v1beta2.Kyma) (int64, error) {
	rk := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: v1beta2.DefaultRuntimeKymaName, Namespace: kyma.Spec.SyncNamespace},
		Spec:       v1beta2.KymaSpec{Channel: kyma.Spec.Channel, Modules: kyma.Spec.Modules},
	}
	if err := rc.Create(ctx, rk, client.FieldOwner(takeover.UserAgentManager)); err != nil {
		return 0, fmt.Errorf("writing KLM's runtime Kyma of %s: %w", kyma.Name, err)
	}
	marks := &unstructured.Unstructured{}
	marks.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("Kyma"))
	marks.SetNamespace(rk.Namespace)
	marks.SetName(rk.Name)
	marks.SetLabels(map[string]string{v1beta2.ManagedByLabel: takeover.ManagedByValue, v1beta2.WatchedByLabel: "kyma", v1beta2.RuntimeIDLabel: kyma.Labels[v1beta2.RuntimeIDLabel]})
	marks.SetAnnotations(map[string]string{takeover.DeprecatedOwnedByAnnotation: namespace + "/" + kyma.Name})
	if err := rc.Apply(ctx, client.ApplyConfigurationFromUnstructured(marks), client.FieldOwner(takeover.SyncContextManager), client.ForceOwnership); err != nil {
		return 1, fmt.Errorf("labelling KLM's runtime Kyma of %s: %w", kyma.Name, err)
	}
	if err := rc.Get(ctx, client.ObjectKeyFromObject(rk), rk); err != nil {
		return 2, err
	}
	rk.Status.State = v1beta2.StateReady
	if err := rc.Status().Update(ctx, rk, client.FieldOwner(takeover.UserAgentManager)); err != nil {
		return 2, fmt.Errorf("writing the status of KLM's runtime Kyma of %s: %w", kyma.Name, err)
	}
	return 3, nil
}

// moduleObjects reads the state of every module object of the fleet: one
// list of ConfigMaps and one of BenchModules per runtime API server.
func moduleObjects(ctx context.Context, runtimeClients []client.Client, kymas int, modules []string) (map[string]moduleObjectState, error) {
	namespaces := make(map[string]bool, kymas)
	for i := range kymas {
		namespaces[kymaName(i)] = true
	}
	isModule := make(map[string]bool, len(modules))
	for _, m := range modules {
		isModule[m] = true
	}
	ours := func(o metav1.Object) bool { return namespaces[o.GetNamespace()] && isModule[o.GetName()] }
	out := make(map[string]moduleObjectState, 2*kymas*len(modules))
	for _, rc := range runtimeClients {
		cms := &corev1.ConfigMapList{}
		if err := rc.List(ctx, cms); err != nil {
			return nil, fmt.Errorf("listing a runtime's ConfigMaps: %w", err)
		}
		for i := range cms.Items {
			if cm := &cms.Items[i]; ours(cm) {
				out["ConfigMap "+cm.Namespace+"/"+cm.Name] = moduleObjectState{uid: string(cm.UID), data: fmt.Sprint(cm.Data)}
			}
		}
		crs := &metav1.PartialObjectMetadataList{}
		crs.SetGroupVersionKind(benchModuleKind.GroupVersion().WithKind(benchModuleKind.Kind + "List"))
		if err := rc.List(ctx, crs); err != nil {
			return nil, fmt.Errorf("listing a runtime's BenchModules: %w", err)
		}
		for i := range crs.Items {
			if cr := &crs.Items[i]; ours(cr) {
				out["BenchModule "+cr.Namespace+"/"+cr.Name] = moduleObjectState{uid: string(cr.UID), generation: cr.Generation}
			}
		}
	}
	return out, nil
}

// takeoverProgress counts the Manifests that recorded status.takenOver
// and those of KLM still there. Until none of KLM's is left, only their
// metadata is listed.
func (b *bench) takeoverProgress(ctx context.Context) (takenOver, klmLeft int, err error) {
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("ManifestList"))
	if err := b.client.List(ctx, meta, client.InNamespace(namespace)); err != nil {
		return 0, 0, err
	}
	for i := range meta.Items {
		if takeover.IsKLMManifest(&v1beta2.Manifest{ObjectMeta: meta.Items[i].ObjectMeta}) {
			klmLeft++
		}
	}
	if klmLeft > 0 {
		return 0, klmLeft, nil
	}
	list := &v1beta2.ManifestList{}
	if err := b.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		switch m := &list.Items[i]; {
		case takeover.IsKLMManifest(m):
			klmLeft++
		case m.Status.TakenOver != nil:
			takenOver++
		}
	}
	return takenOver, klmLeft, nil
}

// waitTakenOver is the end of the takeover phase after every Kyma is
// Ready: every Manifest recorded its takeover and none of KLM's is left.
func (b *bench) waitTakenOver(ctx context.Context) error {
	want := b.opts.Kymas * b.opts.Modules
	for {
		taken, left, err := b.takeoverProgress(ctx)
		if err != nil {
			return err
		}
		if left == 0 && taken >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			if left > 0 { // the Manifests' status was not read
				return fmt.Errorf("%d of KLM's %d Manifests left: %w", left, want, context.Cause(ctx))
			}
			return fmt.Errorf("%d of %d Manifests recorded a takeover: %w", taken, want, context.Cause(ctx))
		case <-time.After(2 * time.Second):
		}
	}
}

// checkTakeover says what the takeover left once the phase ended: the
// Manifests, the runtimes' Kymas, and the module objects compared with
// before.
func (b *bench) checkTakeover(ctx context.Context, p *Phase, before map[string]moduleObjectState, klmWrites int64, wrote time.Duration) (*TakeoverCheck, error) {
	check := &TakeoverCheck{KLMWriteSeconds: wrote.Seconds(), KLMWrites: klmWrites, KymasReadySeconds: b.kymasReady.Seconds(), ModuleObjects: len(before)}
	var err error
	if check.TakenOver, check.KLMManifestsLeft, err = b.takeoverProgress(ctx); err != nil {
		return check, err
	}
	runtimeClients, err := b.runtimeClients()
	if err != nil {
		return check, err
	}
	klmManagers := map[string]bool{takeover.SyncContextManager: true, takeover.UserAgentManager: true, takeover.StatusManager: true}
	for _, rc := range runtimeClients {
		kymas := &metav1.PartialObjectMetadataList{}
		kymas.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("KymaList"))
		if err := rc.List(ctx, kymas); err != nil {
			return check, err
		}
		for i := range kymas.Items {
			k := &kymas.Items[i]
			if k.Labels[v1beta2.ManagedByLabel] == takeover.ManagedByValue || slices.ContainsFunc(k.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return klmManagers[e.Manager] }) {
				check.RuntimeKymasLeft++
			}
		}
	}
	after, err := moduleObjects(ctx, runtimeClients, b.opts.Kymas, b.modules)
	if err != nil {
		return check, err
	}
	check.Recreated, check.SpecChanged = compareModuleObjects(before, after)
	check.ModuleObjectWrites = map[string]float64{}
	for _, resource := range []string{"configmaps", "benchmodules"} {
		check.ModuleObjectWrites[resource] = p.Runtimes.WritesByResource[resource]
	}
	return check, nil
}

// compareModuleObjects counts the module objects of before that are gone
// or recreated (another UID) in after, and those whose generation or data
// changed.
func compareModuleObjects(before, after map[string]moduleObjectState) (recreated, changed int) {
	for key, was := range before {
		now, ok := after[key]
		switch {
		case !ok || now.uid != was.uid:
			recreated++
		case now.generation != was.generation || now.data != was.data:
			changed++
		}
	}
	return recreated, changed
}

func (c *TakeoverCheck) print(w io.Writer, p *Phase, modules int) {
	if c == nil || p == nil {
		return
	}
	fmt.Fprintf(w, "takeover: %d Kymas × %d modules taken over in %.1fs (every Kyma Ready after %.1fs); operator writes per Manifest: KCP %.2f, runtimes %.2f; "+
		"KLM's fleet was written before the operator started (%d writes, %.1fs)\n",
		p.KymasTotal, modules, p.Seconds, c.KymasReadySeconds, p.KCPWritesPerMan, p.RuntimeWritesPerM, c.KLMWrites, c.KLMWriteSeconds)
	fmt.Fprintf(w, "takeover: %d Manifests recorded a takeover, %d of KLM's left, %d runtime Kymas still KLM's\n", c.TakenOver, c.KLMManifestsLeft, c.RuntimeKymasLeft)
	fmt.Fprintf(w, "takeover: writes to module workloads: %d (the bench modules run no workload, a ConfigMap and a BenchModule each: of %d module objects %d recreated or gone, %d with a changed generation or data; "+
		"their writes were to metadata only: %.0f to ConfigMaps, %.0f to BenchModules)\n",
		c.Recreated+c.SpecChanged, c.ModuleObjects, c.Recreated, c.SpecChanged, c.ModuleObjectWrites["configmaps"], c.ModuleObjectWrites["benchmodules"])
}
