package shard

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// bucketIn is a bucket of shard id of count that is not name's.
func bucketIn(t *testing.T, id, count int, name string) string {
	t.Helper()
	for b := range Buckets {
		if b%count == id && b != Bucket(name) {
			return strconv.Itoa(b)
		}
	}
	t.Fatalf("no bucket of shard %d of %d", id, count)
	return ""
}

// TestFilesOnceByOneShard: every object that is not filed under its Kyma's
// bucket is filed by exactly one shard, the one whose informers are sure to
// hold it, and a filed one by none.
func TestFilesOnceByOneShard(t *testing.T) {
	const count = 2
	mine, theirs := nameIn(t, 0), nameIn(t, 1)
	kyma := func(name string, bucket ...string) *v1beta2.Kyma {
		k := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if len(bucket) > 0 {
			k.Labels = map[string]string{v1beta2.ShardBucketLabel: bucket[0]}
		}
		return k
	}
	secret := func(kymaName, bucket string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{
			v1beta2.KymaNameLabel: kymaName, v1beta2.ShardBucketLabel: bucket,
		}}}
	}
	mineBucket := strconv.Itoa(Bucket(mine))
	for _, tc := range []struct {
		what  string
		obj   any
		filer int // the shard that files it; -1: none
	}{
		{"a Kyma filed under its bucket", kyma(mine, mineBucket), -1},
		{"a Kyma not filed", kyma(mine), 0},
		{"another shard's Kyma not filed", kyma(theirs), 1},
		{"a Kyma filed by hand under another shard's bucket", kyma(mine, bucketIn(t, 1, count, mine)), 1},
		{"a Kyma filed by hand under another bucket of its shard", kyma(mine, bucketIn(t, 0, count, mine)), 0},
		{"a Kyma filed under a value that is no bucket", kyma(theirs, "x"), 1},
		{"a Kyma filed under a bucket with a leading zero", kyma(theirs, "0"+strconv.Itoa(Bucket(theirs))), 1},
		{"a Kyma filed under a bucket past the last", kyma(mine, strconv.Itoa(Buckets)), 0},
		{"a kubeconfig Secret filed under another Kyma's bucket", secret(theirs, mineBucket), 0},
		{"a Secret of no Kyma", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "registry"}}, -1},
	} {
		filers := 0
		for id := range count {
			bucket, files := Shard{Count: count, ID: id}.Files(tc.obj)
			if files {
				filers++
				if id != tc.filer {
					t.Errorf("%s: filed by shard %d, want %d", tc.what, id, tc.filer)
				}
				name, _ := KymaOf(tc.obj)
				if bucket != strconv.Itoa(Bucket(name)) {
					t.Errorf("%s: filed under %s, want its Kyma's bucket %d", tc.what, bucket, Bucket(name))
				}
			}
		}
		if want := map[bool]int{true: 0, false: 1}[tc.filer < 0]; filers != want {
			t.Errorf("%s: filed by %d shards, want %d", tc.what, filers, want)
		}
		if _, files := (Shard{}).Files(tc.obj); files {
			t.Errorf("%s: an unsharded operator files it; it needs no label", tc.what)
		}
	}
}

// TestSelectorsSplitTheBuckets: each bucket is selected by exactly one
// shard, and an object filed under none by every shard; an unsharded
// operator selects everything.
func TestSelectorsSplitTheBuckets(t *testing.T) {
	for _, count := range []int{2, 3, 7} {
		selectors := make([]labels.Selector, count)
		for id := range count {
			selectors[id] = Shard{Count: count, ID: id}.Selector()
		}
		for b := range Buckets {
			filed := labels.Set{v1beta2.ShardBucketLabel: strconv.Itoa(b)}
			var by []int
			for id, sel := range selectors {
				if sel.Matches(filed) {
					by = append(by, id)
				}
			}
			if len(by) != 1 || by[0] != b%count {
				t.Fatalf("bucket %d of %d shards is selected by shards %v, want only %d", b, count, by, b%count)
			}
		}
		for _, unfiled := range []labels.Set{{}, {v1beta2.ShardBucketLabel: "x"}} {
			for id, sel := range selectors {
				if !sel.Matches(unfiled) {
					t.Errorf("shard %d of %d does not select %v: a Kyma would have no shard until filed", id, count, unfiled)
				}
			}
		}
	}
	if !(Shard{}).Selector().Empty() {
		t.Error("an unsharded operator must select every object")
	}
}

// TestByObjectHasOneEntryPerKind: the cache options hold one selector per
// kind (two would leave the winner to map order), and a Kyma's selector is
// the --kyma-selector and the shard's together.
func TestByObjectHasOneEntryPerKind(t *testing.T) {
	selection := labels.SelectorFromSet(labels.Set{"ring": "canary"})
	byObject := Shard{Count: 2, ID: 1}.ByObject(selection)
	kinds := map[string]labels.Selector{}
	for obj, opts := range byObject {
		kinds[fmt.Sprintf("%T", obj)] = opts.Label
	}
	if len(kinds) != 3 || len(byObject) != 3 {
		t.Fatalf("ByObject has kinds %v, want one entry each for Kymas, Manifests and Secrets", kinds)
	}
	ours := strconv.Itoa(1)
	kyma := kinds["*v1beta2.Kyma"]
	if !kyma.Matches(labels.Set{"ring": "canary", v1beta2.ShardBucketLabel: ours}) || kyma.Matches(labels.Set{v1beta2.ShardBucketLabel: ours}) {
		t.Errorf("the Kyma selector %q must take both the --kyma-selector and the shard's", kyma)
	}
	if kyma.Matches(labels.Set{"ring": "canary", v1beta2.ShardBucketLabel: "0"}) {
		t.Errorf("the Kyma selector %q selects another shard's bucket", kyma)
	}
	if unsharded := (Shard{}).ByObject(selection); len(unsharded) != 1 {
		t.Errorf("an unsharded operator's ByObject = %v, want the Kyma selector alone", unsharded)
	}
}
