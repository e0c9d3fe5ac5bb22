package fleetbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// The takeover phase (--takeover, issue 35): the fleet is written as the
// Kyma lifecycle-manager (KLM) leaves it before the operator starts — each
// Kyma with KLM's finalizers, each module with KLM's Manifest
// (`<kyma>-<module>-<fnv32>`, its finalizer, its status.synced) and its
// objects applied under KLM's field manager with KLM's marks — and the
// operator, started with --klm-takeover=all, takes it over. The phase ends
// when every Kyma is Ready at the installed version; the report then says
// how many Manifests recorded a takeover, how many of KLM's are left, and
// how many module objects changed anything but metadata (the spec or data
// of what a runtime runs: it must be none).

const phaseTakeover = "takeover"

// benchModuleKind is the custom resource every bench module ships.
var benchModuleKind = schema.GroupVersionKind{Group: benchGroup, Version: "v1", Kind: "BenchModule"}

// TakeoverCheck is what the takeover left, checked once the phase ended.
type TakeoverCheck struct {
	// KLMWriteSeconds is how long writing KLM's fleet took (before the
	// operator started; not part of the phase).
	KLMWriteSeconds float64 `json:"klmWriteSeconds"`
	// TakenOver counts the Manifests that recorded status.takenOver;
	// KLMManifestsLeft those of KLM still there; ReleasedSeconds how long
	// after the phase's end the last of KLM's Manifests went.
	TakenOver        int     `json:"takenOver"`
	KLMManifestsLeft int     `json:"klmManifestsLeft"`
	ReleasedSeconds  float64 `json:"releasedSeconds"`
	// ModuleObjects are the module objects compared, in every runtime;
	// Recreated those with a new UID, SpecChanged those whose generation
	// or data changed: both must be 0.
	ModuleObjects int `json:"moduleObjects"`
	Recreated     int `json:"recreated"`
	SpecChanged   int `json:"specChanged"`
}

// klmManifestName is KLM's name of a module's Manifest
// (pkg/module/common/module.go): the Kyma, the module and an fnv32 hash.
func klmManifestName(kyma, module string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(module + module))
	return fmt.Sprintf("%s-%s-%d", kyma, module, h.Sum32())
}

// moduleObjectState is what must not change of a module object.
type moduleObjectState struct {
	uid        string
	generation int64
	data       string
}

// writeKLMFleet writes every Kyma as KLM leaves it, concurrency at a time,
// and returns the state of every module object, to compare afterwards.
func (b *bench) writeKLMFleet(ctx context.Context, kubeconfigs [][]byte) (map[string]moduleObjectState, error) {
	runtimeClients := make([]client.Client, len(b.runtimes))
	for i, rt := range b.runtimes {
		c, err := client.New(withLimits(rt.Config(), -1, 0), client.Options{Scheme: b.client.Scheme()})
		if err != nil {
			return nil, err
		}
		runtimeClients[i] = c
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
		return nil, err
	}
	fmt.Fprintf(b.opts.Progress, "takeover: wrote KLM's fleet (%d writes)\n", written.Load())
	return moduleObjects(ctx, runtimeClients, b.opts.Kymas, b.modules)
}

// writeKLMKyma writes one Kyma as KLM leaves it.
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
	controller := true
	owner := metav1.OwnerReference{APIVersion: v1beta2.GroupVersion.String(), Kind: "Kyma", Name: kyma.Name, UID: kyma.UID, Controller: &controller}
	for _, module := range b.modules {
		name := klmManifestName(kyma.Name, module)
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

// moduleObjects reads the state of every module object of the fleet.
func moduleObjects(ctx context.Context, runtimeClients []client.Client, kymas int, modules []string) (map[string]moduleObjectState, error) {
	out := map[string]moduleObjectState{}
	for i := range kymas {
		rc := runtimeClients[i%len(runtimeClients)]
		for _, module := range modules {
			cm := &corev1.ConfigMap{}
			if err := rc.Get(ctx, client.ObjectKey{Namespace: kymaName(i), Name: module}, cm); err != nil {
				return nil, err
			}
			out["ConfigMap "+kymaName(i)+"/"+module] = moduleObjectState{uid: string(cm.UID), data: fmt.Sprint(cm.Data)}
			cr := &metav1.PartialObjectMetadata{}
			cr.SetGroupVersionKind(benchModuleKind)
			if err := rc.Get(ctx, client.ObjectKey{Namespace: kymaName(i), Name: module}, cr); err != nil {
				return nil, err
			}
			out["BenchModule "+kymaName(i)+"/"+module] = moduleObjectState{uid: string(cr.UID), generation: cr.Generation}
		}
	}
	return out, nil
}

// checkTakeover compares the module objects with before, and waits (up to
// the run's end) until KLM's Manifests are gone.
func (b *bench) checkTakeover(ctx context.Context, before map[string]moduleObjectState, wrote time.Duration) (*TakeoverCheck, error) {
	check := &TakeoverCheck{KLMWriteSeconds: wrote.Seconds(), ModuleObjects: len(before)}
	start := time.Now()
	for {
		list := &v1beta2.ManifestList{}
		if err := b.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return check, err
		}
		check.TakenOver, check.KLMManifestsLeft = 0, 0
		for i := range list.Items {
			switch m := &list.Items[i]; {
			case takeover.IsKLMManifest(m):
				check.KLMManifestsLeft++
			case m.Status.TakenOver != nil:
				check.TakenOver++
			}
		}
		if check.KLMManifestsLeft == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return check, context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
	check.ReleasedSeconds = time.Since(start).Seconds()
	runtimeClients := make([]client.Client, len(b.runtimes))
	for i, rt := range b.runtimes {
		c, err := client.New(rt.Config(), client.Options{Scheme: b.client.Scheme()})
		if err != nil {
			return check, err
		}
		runtimeClients[i] = c
	}
	after, err := moduleObjects(ctx, runtimeClients, b.opts.Kymas, b.modules)
	if err != nil {
		return check, err
	}
	for key, was := range before {
		now := after[key]
		switch {
		case now.uid != was.uid:
			check.Recreated++
		case now.generation != was.generation || now.data != was.data:
			check.SpecChanged++
		}
	}
	return check, nil
}

func (c *TakeoverCheck) print(w io.Writer) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "takeover: KLM's fleet written in %.1fs before the operator started; %d Manifests recorded a takeover, %d of KLM's left (the last released %.1fs after the phase); "+
		"of %d module objects %d recreated and %d with a changed spec or data (the bench modules run no workload: a ConfigMap and a custom resource each)\n",
		c.KLMWriteSeconds, c.TakenOver, c.KLMManifestsLeft, c.ReleasedSeconds, c.ModuleObjects, c.Recreated, c.SpecChanged)
}
