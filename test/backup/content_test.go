package backup

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	gtypes "github.com/onsi/gomega/types"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	lmbackup "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/backup"
)

// ownerObjects are a runtime owner's own objects: in two Namespaces named
// afresh for each run, so that a run finds none of an earlier one's.
type ownerObjects struct {
	teamA, teamB string
	// specs are the specs of the Samples "mine" (in teamA) and "theirs"
	// (in teamB) by name.
	specs map[string]any
}

// createOwnerObjects creates, in a runtime that has the sample module,
// what a backup holds: the Samples "mine" and "theirs", and the Secrets
// they refer to (db-credentials in teamA, tls-cert in teamB); and what it
// leaves out: a Secret nothing refers to ("unreferenced") and a Sample
// with an owner ("owned").
func createOwnerObjects(c client.Client) ownerObjects {
	ctx := context.Background()
	suffix := rand.String(5)
	o := ownerObjects{
		teamA: "team-a-" + suffix, teamB: "team-b-" + suffix,
		specs: map[string]any{
			"mine":   map[string]any{"size": int64(1), "dbSecretRef": map[string]any{"name": "db-credentials"}},
			"theirs": map[string]any{"size": int64(2), "tls": []any{map[string]any{"secretName": "tls-cert"}}},
		},
	}
	for _, ns := range []string{o.teamA, o.teamB} {
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "db-credentials", Namespace: o.teamA}, StringData: map[string]string{"password": "s3cret"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tls-cert", Namespace: o.teamB}, StringData: map[string]string{"tls.crt": "the old runtime's"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unreferenced", Namespace: o.teamA}, StringData: map[string]string{"k": "v"}},
	} {
		Expect(c.Create(ctx, s)).To(Succeed())
	}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: o.teamA}}
	Expect(c.Create(ctx, owner)).To(Succeed())
	for _, cr := range []struct {
		name, namespace string
		spec            any
		owner           *corev1.ConfigMap
	}{
		{"mine", o.teamA, o.specs["mine"], nil},
		{"theirs", o.teamB, o.specs["theirs"], nil},
		{"owned", o.teamA, map[string]any{"size": int64(3)}, owner},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{"spec": cr.spec}}
		obj.SetGroupVersionKind(sampleGVK)
		obj.SetName(cr.name)
		obj.SetNamespace(cr.namespace)
		obj.SetLabels(map[string]string{"team": "a"})
		if cr.owner != nil {
			obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cr.owner.Name, UID: cr.owner.UID}})
		}
		Expect(c.Create(ctx, obj)).To(Succeed())
	}
	return o
}

// deleteNamespaces deletes Namespaces and waits until their custom
// resources are gone: until then they would hold up the sample module's
// removal.
func deleteNamespaces(c client.Client, names ...string) {
	ctx := context.Background()
	for _, ns := range names {
		Expect(client.IgnoreNotFound(c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	}
	Eventually(func(g Gomega) {
		for _, ns := range names {
			list := sampleList()
			err := c.List(ctx, list, client.InNamespace(ns))
			if !apierrors.IsNotFound(err) {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(list.Items).To(BeEmpty(), "Samples left in %s", ns)
			}
		}
	}, timeout, interval).Should(Succeed())
}

// objectResult matches what a restore did with one object.
func objectResult(kind, namespace, name string, action lmbackup.Action) gtypes.GomegaMatcher {
	return And(HaveField("Kind", kind), HaveField("Namespace", namespace), HaveField("Name", name), HaveField("Action", action))
}

// A module CRD with hundreds of the owner's custom resources: a snapshot
// reads them page by page, all of them, takes the Secret they all refer
// to once and only when asked, and a snapshot over its bound fails,
// naming the kind that filled it, instead of leaving some out.
func TestSnapshotReadsEveryPageAndStopsAtItsBound(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	const name = "many-crs"
	const crs = 260 // more than one page of the snapshot's lists
	register(t, name, env.runtimes[0], "sample")
	t.Cleanup(func() { unregister(name) })
	Eventually(func(g Gomega) {
		g.Expect(manifestsOf(g, name)).To(ContainElement(HaveField("Status.Synced", ContainElement(HaveField("Kind", "CustomResourceDefinition")))))
	}, timeout, interval).Should(Succeed())
	Eventually(func(g Gomega) { // the CRD is served
		g.Expect(meta.IsNoMatchError(env.rt[0].List(ctx, sampleList()))).To(BeFalse())
	}, timeout, interval).Should(Succeed())

	ns := "many-" + rand.String(5)
	Expect(env.rt[0].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { deleteNamespaces(env.rt[0], ns) })
	Expect(env.rt[0].Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}, StringData: map[string]string{"k": "v"}})).To(Succeed())
	var created errgroup.Group
	created.SetLimit(8)
	for i := range crs {
		created.Go(func() error {
			obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"index": int64(i), "secretRef": map[string]any{"name": "shared"}}}}
			obj.SetGroupVersionKind(sampleGVK)
			obj.SetName(fmt.Sprintf("cr-%03d", i))
			obj.SetNamespace(ns)
			return env.rt[0].Create(ctx, obj)
		})
	}
	Expect(created.Wait()).To(Succeed())

	kyma := &v1beta2.Kyma{}
	Expect(env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, kyma)).To(Succeed())
	src := backup.Source{Kyma: kyma, Manifests: manifestsOf(Default, name), Runtime: env.rt[0], Mapper: env.rt[0].RESTMapper(), SyncNamespace: v1beta2.DefaultRuntimeNamespace}
	inNamespace := func(s *backup.Snapshot) []string {
		var names []string
		for _, r := range s.Resources {
			if r.Object.GetNamespace() == ns {
				names = append(names, r.Object.GetName())
			}
		}
		return names
	}

	s, err := backup.Take(ctx, src, clock.Now())
	Expect(err).NotTo(HaveOccurred())
	Expect(inNamespace(s)).To(HaveLen(crs))
	Expect(inNamespace(s)).To(ContainElements("cr-000", fmt.Sprintf("cr-%03d", crs-1)))
	Expect(s.Secrets).To(BeEmpty(), "Secrets only when the schedule asks for them")

	src.IncludeSecrets = true
	s, err = backup.Take(ctx, src, clock.Now())
	Expect(err).NotTo(HaveOccurred())
	Expect(s.Secrets).To(ConsistOf(And(HaveField("Name", "shared"), HaveField("Namespace", ns), HaveField("Data", HaveKeyWithValue("k", []byte("v"))))))
	data, err := s.Encode()
	Expect(err).NotTo(HaveOccurred())

	src.MaxBytes = len(data) / 2
	_, err = backup.Take(ctx, src, clock.Now())
	Expect(err).To(MatchError(And(
		ContainSubstring(fmt.Sprintf("more than %d bytes", len(data)/2)),
		ContainSubstring("of kind Sample"),
		ContainSubstring("delete the custom resources they no longer need"),
	)))
}

// format1 is a backup as the operator wrote it before format 2 (the
// runtime Kyma's modules and the default custom resource only).
const format1 = `{"format":1,"kyma":%q,"takenAt":"2025-12-01T10:00:00Z",
"labels":{"operator.kyma-project.io/beta":"true"},"spec":{"channel":"regular","modules":[{"name":"sample","managed":true,"customResourcePolicy":"CreateAndDelete"}]},
"runtimeModules":[{"name":"evolving","managed":true,"customResourcePolicy":"CreateAndDelete"}],
"resources":[{"module":"sample","object":{"apiVersion":"operator.kyma-project.io/v1alpha1","kind":"Sample",
"metadata":{"name":"default","namespace":"kyma-system","labels":{"operator.kyma-project.io/managed-by":"lifecycle-manager","operator.kyma-project.io/kyma-name":%q,"operator.kyma-project.io/module-name":"sample"}},
"spec":{"greeting":"from a format 1 backup"}}}]}`

// A backup taken before the format changed still restores: the modules,
// the owner's module and the default custom resource's spec.
func TestFormat1BackupRestores(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	const name = "old-format"
	register(t, name, env.runtimes[1])
	t.Cleanup(func() { unregister(name) })

	// Encrypted to the recipients of the schedule's key Secret, as the
	// operator does.
	secret := &corev1.Secret{}
	Expect(env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: keySecret}, secret)).To(Succeed())
	keys, err := backup.ReadKeySecret(secret)
	Expect(err).NotTo(HaveOccurred())
	encrypted, err := keys.Recipients.Encrypt(fmt.Appendf(nil, format1, name, name))
	Expect(err).NotTo(HaveOccurred())
	info, err := env.store.Push(ctx, name, time.Date(2025, 12, 1, 10, 0, 0, 0, time.UTC), encrypted, keys.Recipients.Fingerprints())
	Expect(err).NotTo(HaveOccurred())

	res, err := lmbackup.Restore(ctx, lmbackup.RestoreOptions{
		Options: lmbackup.Options{KCP: env.kcp, Namespace: kcpNamespace, Kyma: name, Repository: env.registry.Host() + "/backups", IdentityFiles: []string{env.identity}, Store: env.storeOpt},
		Backup:  info.Tag, Timeout: timeout,
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Format).To(Equal(1))
	Expect(res.Modules).To(Equal([]string{"sample"}))
	Expect(res.RuntimeModules).To(Equal([]string{"evolving"}))
	Expect(res.Objects).To(ContainElement(And(HaveField("Kind", "Sample"), HaveField("Name", "default"), HaveField("Action", BeElementOf(lmbackup.Created, lmbackup.Updated)))))
	Expect(res.Failed()).To(BeZero(), "%+v", res.Objects)
	Eventually(func(g Gomega) {
		rk := &v1beta2.Kyma{}
		g.Expect(env.rt[1].Get(ctx, client.ObjectKey{Namespace: v1beta2.DefaultRuntimeNamespace, Name: v1beta2.DefaultRuntimeKymaName}, rk)).To(Succeed())
		g.Expect(rk.Spec.Modules).To(ConsistOf(HaveField("Name", "evolving")))
		spec, _, _ := unstructured.NestedMap(sampleCR(g, env.rt[1]).Object, "spec")
		g.Expect(spec).To(Equal(map[string]any{"greeting": "from a format 1 backup"}))
	}, timeout, interval).Should(Succeed())
}

func manifestsOf(g Gomega, kyma string) []v1beta2.Manifest {
	list := &v1beta2.ManifestList{}
	g.Expect(env.kcp.List(context.Background(), list, client.InNamespace(kcpNamespace), client.MatchingLabels{v1beta2.KymaNameLabel: kyma})).To(Succeed())
	return list.Items
}

func sampleList() *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(sampleGVK.GroupVersion().WithKind("SampleList"))
	return list
}
