package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
)

// filerFieldManager writes the shard bucket label, apart from the Kyma
// controller's Manifests and from whoever wrote the object.
const filerFieldManager = "lifecycle-manager-shard"

// filerConcurrency is how many objects a shard's leader files at once. A
// fleet that was never filed (an operator that ran unsharded before) takes
// one write per object, once; the API server's priority and fairness, not
// this, is what keeps that from crowding out other clients.
const filerConcurrency = 4

// kindOfAKyma is a kind filed under its Kyma's bucket, and held by each
// shard's informers for its share only.
type kindOfAKyma struct {
	name    string
	object  client.Object
	newList func() client.ObjectList
}

var kindsOfAKyma = []kindOfAKyma{
	{"Kyma", &v1beta2.Kyma{}, func() client.ObjectList { return &v1beta2.KymaList{} }},
	{"Manifest", &v1beta2.Manifest{}, func() client.ObjectList { return &v1beta2.ManifestList{} }},
	{"Secret", &corev1.Secret{}, func() client.ObjectList { return &corev1.SecretList{} }},
}

// SetupFiler makes s's leader file its objects under their Kyma's bucket
// (v1beta2.ShardBucketLabel): Kymas, Manifests and kubeconfig Secrets that
// lack the label or carry a wrong one. Each object is filed by one shard
// only (Files), with one write. An unsharded operator files nothing: it
// selects nothing by the label.
func (s Shard) SetupFiler(mgr ctrl.Manager) error {
	if !s.Enabled() {
		return nil
	}
	// The filer must see what the wrapper hides: a Kyma labelled with this
	// shard's bucket although its name is another's.
	held := Unfiltered(mgr.GetCache())
	files := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		_, ok := s.Files(obj)
		return ok
	})
	for _, kind := range kindsOfAKyma {
		f := &filer{shard: s, held: held, writer: mgr.GetClient(), newObject: func() client.Object {
			return kind.object.DeepCopyObject().(client.Object)
		}}
		err := ctrl.NewControllerManagedBy(mgr).
			Named("shard-filer-" + strings.ToLower(kind.name)).
			WithOptions(controller.Options{MaxConcurrentReconciles: filerConcurrency}).
			WatchesRawSource(source.Kind(held, kind.object, &handler.EnqueueRequestForObject{}, files)).
			Complete(f)
		if err != nil {
			return fmt.Errorf("setting up the shard filer of %ss: %w", kind.name, err)
		}
	}
	return nil
}

// Files says whether s's leader writes obj's shard bucket label, and the
// value: obj belongs to a Kyma, its label is not its Kyma's bucket, and s
// is the one shard that writes it. An object filed under another valid
// bucket is held by that bucket's shard alone, which files it; one filed
// under none (or under a value that is no bucket) is held by every shard,
// and its Kyma's shard files it.
func (s Shard) Files(obj any) (bucket string, ok bool) {
	if !s.Enabled() {
		return "", false
	}
	o, isObject := obj.(client.Object)
	name, ofAKyma := KymaOf(obj)
	if !isObject || !ofAKyma {
		return "", false
	}
	want := strconv.Itoa(Bucket(name))
	label, labelled := o.GetLabels()[v1beta2.ShardBucketLabel]
	if labelled && label == want {
		return "", false
	}
	if filed, valid := parseBucket(label); labelled && valid {
		return want, filed%s.Count == s.ID
	}
	return want, s.OwnsKyma(name)
}

// parseBucket reads a label value the way the selectors match it: only the
// canonical decimal of a bucket ("7", not "07") is one.
func parseBucket(value string) (int, bool) {
	bucket, err := strconv.Atoi(value)
	if err != nil || bucket < 0 || bucket >= Buckets || strconv.Itoa(bucket) != value {
		return 0, false
	}
	return bucket, true
}

// filer writes one kind's shard bucket labels.
type filer struct {
	shard     Shard
	held      cache.Cache
	writer    client.Client
	newObject func() client.Object
}

// Reconcile files the object, if it is still s's to file: one merge patch
// of the one label, so that nothing else of the object is written.
func (f *filer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := f.newObject()
	if err := f.held.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	bucket, ok := f.shard.Files(obj)
	if !ok {
		return ctrl.Result{}, nil
	}
	was, labelled := obj.GetLabels()[v1beta2.ShardBucketLabel]
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{v1beta2.ShardBucketLabel: bucket}}})
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := f.writer.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(filerFieldManager)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx)
	if labelled {
		// A value someone set by hand, or an object copied from elsewhere:
		// worth a line, as it kept the object from its shard until now.
		log.Info("Put the shard bucket label right", "label", v1beta2.ShardBucketLabel, "was", was, "now", bucket)
	} else {
		log.V(1).Info("Filed under its shard bucket", "label", v1beta2.ShardBucketLabel, "bucket", bucket)
	}
	return ctrl.Result{}, nil
}

// Unfiltered is what c's informers hold, other shards' objects included: c
// itself unless it is a shard's cache (NewCache).
func Unfiltered(c cache.Cache) cache.Cache {
	if sc, ok := c.(*shardCache); ok {
		return sc.Cache
	}
	return c
}

// Setup adds s's parts to mgr, before it starts: the filer (SetupFiler) and
// the lifecycle_manager_cached_objects metric of what its informers hold.
func (s Shard) Setup(ctx context.Context, mgr ctrl.Manager) error {
	counter, err := NewHeldCounter(ctx, mgr.GetCache())
	if err != nil {
		return err
	}
	metrics.ReportCachedObjects(ctx, s.ID, counter.Counts)
	return s.SetupFiler(mgr)
}
