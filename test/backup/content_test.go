package backup

import (
	"context"

	. "github.com/onsi/gomega"
	gtypes "github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(sampleGVK.GroupVersion().WithKind("SampleList"))
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

