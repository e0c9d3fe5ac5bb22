// Package klm plans and checks the takeover of a fleet from the Kyma
// lifecycle-manager (KLM) for lmctl (docs/migrating-from-klm.md): what the
// operator would take over in each runtime, before anything changes, and
// what it took over afterwards. It only reads, in the control plane and in
// the runtimes, and decides as the operator does (internal/takeover).
package klm

import (
	"context"
	"fmt"
	"slices"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/takeover"
)

// maxNamed bounds the objects a plan names per module.
const maxNamed = 10

// Plan is what the operator would take over, per Kyma, and the fleet's
// totals.
type Plan struct {
	Kymas  []KymaPlan `json:"kymas"`
	Totals Totals     `json:"totals"`
}

// Totals add up a plan.
type Totals struct {
	Kymas int `json:"kymas"`
	// Labelled counts the Kymas --klm-takeover=labelled would take over.
	Labelled     int `json:"labelled"`
	KLMManifests int `json:"klmManifests"`
	TakeOver     int `json:"takeOver"`
	Left         int `json:"left"`
	Gone         int `json:"gone"`
	TakenOver    int `json:"takenOver"`
}

// KymaPlan is one Kyma's part.
type KymaPlan struct {
	Kyma string `json:"kyma"`
	// Labelled: the Kyma carries takeover.Label=true, so
	// --klm-takeover=labelled covers it (all covers every Kyma).
	Labelled bool `json:"labelled"`
	// CoveredBy are the values of --klm-takeover under which the operator
	// would take the Kyma over (takeover.Policy.Covers): lmctl cannot read
	// the operator's flag.
	CoveredBy []takeover.Policy `json:"coveredBy"`
	// KLMFinalizers are KLM's finalizers still on the Kyma.
	KLMFinalizers []string     `json:"klmFinalizers,omitempty"`
	Modules       []ModulePlan `json:"modules,omitempty"`
	// Runtime is what KLM left in the runtime; RuntimeError says why it
	// could not be read.
	Runtime      *RuntimePlan `json:"runtime,omitempty"`
	RuntimeError string       `json:"runtimeError,omitempty"`
}

// ModulePlan is one KLM Manifest's part, or one Manifest of this
// operator's that took one over.
type ModulePlan struct {
	Module      string `json:"module"`
	KLMManifest string `json:"klmManifest,omitempty"`
	Version     string `json:"version,omitempty"`
	// TakeOver counts the objects of KLM's inventory that KLM marked as
	// its own and exist: they would be taken over. Left names those that
	// exist but KLM did not mark (the runtime owner's: never taken), Gone
	// counts those that no longer exist.
	TakeOver  int      `json:"takeOver"`
	Left      []string `json:"left,omitempty"`
	LeftCount int      `json:"leftCount"`
	Gone      int      `json:"gone"`
	// DefaultCR is the default custom resource KLM created, which would
	// become the module's.
	DefaultCR string `json:"defaultCR,omitempty"`
	// Manifest is this operator's Manifest of the module, if it exists;
	// TakenOver what it recorded.
	Manifest  string             `json:"manifest,omitempty"`
	TakenOver *v1beta2.TakenOver `json:"takenOver,omitempty"`
}

// RuntimePlan is what KLM left in a runtime besides the modules.
type RuntimePlan struct {
	// KymaManagers are KLM's field managers on the runtime's Kyma (those
	// the operator moves to its own, kyma_takeover.go).
	KymaManagers []string `json:"kymaManagers,omitempty"`
	// CatalogCopies counts KLM's copies of the catalog.
	CatalogCopies int `json:"catalogCopies"`
	// Agent names KLM's agent objects present.
	Agent []string `json:"agent,omitempty"`
}

// RuntimeClient reaches a Kyma's runtime.
type RuntimeClient func(ctx context.Context, kyma string) (client.Client, error)

// BuildPlan reads the Kymas of namespace (one when name is set) and what
// KLM left for each, and says what the operator would take over. A
// runtime that cannot be read is reported on its Kyma; the plan goes on.
func BuildPlan(ctx context.Context, kcp client.Client, namespace, name, syncNamespace string, runtime RuntimeClient) (*Plan, error) {
	kymas, err := listKymas(ctx, kcp, namespace, name)
	if err != nil {
		return nil, err
	}
	manifests := &v1beta2.ManifestList{}
	if err := kcp.List(ctx, manifests, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Manifests: %w", err)
	}
	plan := &Plan{}
	for i := range kymas {
		k := &kymas[i]
		kp := KymaPlan{Kyma: k.Name, Labelled: k.Labels[takeover.Label] == "true", CoveredBy: []takeover.Policy{}}
		for _, p := range []takeover.Policy{takeover.Off, takeover.Labelled, takeover.All} {
			if p.Covers(k) {
				kp.CoveredBy = append(kp.CoveredBy, p)
			}
		}
		for _, f := range k.Finalizers {
			if slices.Contains(takeover.KymaFinalizers, f) {
				kp.KLMFinalizers = append(kp.KLMFinalizers, f)
			}
		}
		var rc client.Client
		if c, err := runtime(ctx, k.Name); err != nil {
			kp.RuntimeError = err.Error()
		} else {
			rc = c
		}
		for j := range manifests.Items {
			m := &manifests.Items[j]
			if m.Labels[v1beta2.KymaNameLabel] != k.Name {
				continue
			}
			if takeover.IsKLMManifest(m) {
				mp := ModulePlan{Module: m.Labels[v1beta2.ModuleNameLabel], KLMManifest: m.Name, Version: m.Spec.Version}
				if rc != nil {
					if err := inventory(ctx, rc, m, syncNamespace, &mp); err != nil {
						kp.RuntimeError = err.Error()
					}
				}
				if ours := successor(manifests.Items, m); ours != nil {
					mp.Manifest, mp.TakenOver = ours.Name, ours.Status.TakenOver
				}
				kp.Modules = append(kp.Modules, mp)
			} else if m.Status.TakenOver != nil && !slices.ContainsFunc(manifests.Items, func(o v1beta2.Manifest) bool {
				return o.Name == m.Status.TakenOver.Manifest && takeover.IsKLMManifest(&o)
			}) {
				kp.Modules = append(kp.Modules, ModulePlan{Module: m.Spec.ModuleName, Manifest: m.Name, TakenOver: m.Status.TakenOver})
			}
		}
		sort.Slice(kp.Modules, func(a, b int) bool { return kp.Modules[a].Module < kp.Modules[b].Module })
		if rc != nil {
			rp, err := runtimeSide(ctx, rc, syncNamespace)
			if err != nil {
				kp.RuntimeError = err.Error()
			}
			kp.Runtime = rp
		}
		plan.add(kp)
	}
	return plan, nil
}

func (p *Plan) add(kp KymaPlan) {
	p.Kymas = append(p.Kymas, kp)
	p.Totals.Kymas++
	if kp.Labelled {
		p.Totals.Labelled++
	}
	for _, m := range kp.Modules {
		if m.KLMManifest != "" {
			p.Totals.KLMManifests++
		}
		p.Totals.TakeOver += m.TakeOver
		p.Totals.Left += m.LeftCount
		p.Totals.Gone += m.Gone
		if m.TakenOver != nil {
			p.Totals.TakenOver += m.TakenOver.Objects
		}
	}
}

func listKymas(ctx context.Context, kcp client.Client, namespace, name string) ([]v1beta2.Kyma, error) {
	if name != "" {
		k := &v1beta2.Kyma{}
		if err := kcp.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, k); err != nil {
			return nil, fmt.Errorf("reading Kyma %s: %w", name, err)
		}
		return []v1beta2.Kyma{*k}, nil
	}
	list := &v1beta2.KymaList{}
	if err := kcp.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Kymas: %w", err)
	}
	sort.Slice(list.Items, func(a, b int) bool { return list.Items[a].Name < list.Items[b].Name })
	return list.Items, nil
}

// successor is this operator's Manifest of the KLM Manifest's module: the
// one that recorded taking it over (as the operator finds it), else the
// one of the module's name (kyma.ManifestName) that has taken over
// nothing yet.
func successor(manifests []v1beta2.Manifest, klm *v1beta2.Manifest) *v1beta2.Manifest {
	kymaName, module := klm.Labels[v1beta2.KymaNameLabel], klm.Labels[v1beta2.ModuleNameLabel]
	var named *v1beta2.Manifest
	for i := range manifests {
		m := &manifests[i]
		if takeover.IsKLMManifest(m) || m.Labels[v1beta2.KymaNameLabel] != kymaName {
			continue
		}
		if m.Status.TakenOver != nil && m.Status.TakenOver.Manifest == klm.Name {
			return m
		}
		if m.Name == kyma.ManifestName(kymaName, module) && m.Status.TakenOver == nil {
			named = m
		}
	}
	return named
}

// inventory sorts KLM's record of what it applied as the operator would:
// taken over only when KLM marked it (takeover.AppliedBy).
func inventory(ctx context.Context, rc client.Client, m *v1beta2.Manifest, syncNamespace string, mp *ModulePlan) error {
	owner := m.Namespace + "/" + m.Name
	for _, res := range m.Status.Synced {
		live, err := metadataOf(ctx, rc, schema.GroupVersionKind(res.GroupVersionKind), client.ObjectKey{Namespace: res.Namespace, Name: res.Name})
		switch {
		case err != nil:
			return err
		case live == nil:
			mp.Gone++
		case takeover.AppliedBy(&live.ObjectMeta, owner):
			mp.TakeOver++
		default:
			mp.LeftCount++
			if len(mp.Left) < maxNamed {
				mp.Left = append(mp.Left, describe(res.Kind, res.Namespace, res.Name))
			}
		}
	}
	cr := m.Spec.Resource
	if cr == nil || m.Spec.CustomResourcePolicy == v1beta2.CustomResourcePolicyIgnore {
		return nil
	}
	key := client.ObjectKey{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	if key.Name == "" {
		key.Name = m.Name // KLM names an unnamed default CR after its Manifest
	}
	if key.Namespace == "" {
		key.Namespace = syncNamespace
		if namespaced, err := rc.IsObjectNamespaced(cr); err == nil && !namespaced {
			key.Namespace = ""
		}
	}
	live, err := metadataOf(ctx, rc, cr.GroupVersionKind(), key)
	if err != nil || live == nil {
		return err
	}
	if slices.ContainsFunc(live.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == takeover.DefaultCRManager }) {
		mp.DefaultCR = describe(cr.GetKind(), key.Namespace, key.Name)
	}
	return nil
}

// runtimeSide reads what KLM left in the runtime besides the modules.
func runtimeSide(ctx context.Context, rc client.Client, syncNamespace string) (*RuntimePlan, error) {
	rp := &RuntimePlan{}
	kymaKey := client.ObjectKey{Namespace: syncNamespace, Name: v1beta2.DefaultRuntimeKymaName}
	if live, err := metadataOf(ctx, rc, v1beta2.GroupVersion.WithKind("Kyma"), kymaKey); err != nil {
		return rp, err
	} else if live != nil {
		for _, e := range live.ManagedFields {
			if (e.Manager == takeover.SyncContextManager || e.Manager == takeover.UserAgentManager || e.Manager == takeover.StatusManager) &&
				!slices.Contains(rp.KymaManagers, e.Manager) {
				rp.KymaManagers = append(rp.KymaManagers, e.Manager)
			}
		}
	}
	for _, kind := range []string{"ModuleTemplate", "ModuleReleaseMeta"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(v1beta2.GroupVersion.WithKind(kind + "List"))
		if err := rc.List(ctx, list, client.InNamespace(syncNamespace)); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return rp, fmt.Errorf("listing the runtime's catalog: %w", err)
		}
		for _, item := range list.Items {
			if slices.ContainsFunc(item.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == takeover.CatalogManager }) {
				rp.CatalogCopies++
			}
		}
	}
	for _, o := range takeover.Agent {
		live, err := metadataOf(ctx, rc, o.GVK, o.Key(syncNamespace))
		if err != nil {
			return rp, err
		}
		if live != nil && live.Labels[v1beta2.ManagedByLabel] == takeover.ManagedByValue {
			rp.Agent = append(rp.Agent, describe(o.GVK.Kind, o.Key(syncNamespace).Namespace, o.Name))
		}
	}
	return rp, nil
}

// metadataOf reads an object's metadata; nil when it, or its kind, does
// not exist.
func metadataOf(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, key client.ObjectKey) (*metav1.PartialObjectMetadata, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s: %w", gvk.Kind, key, err)
	}
	return live, nil
}

func describe(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}
