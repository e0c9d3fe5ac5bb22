package shard

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

func TestValidateSaysWhichFlagIsWrong(t *testing.T) {
	for _, tc := range []struct {
		shard Shard
		want  string
	}{
		{Shard{}, ""},
		{Shard{Count: 1}, ""},
		{Shard{Count: 3, ID: 2}, ""},
		{Shard{Count: -1}, "--shards must be 1 or more"},
		{Shard{Count: 1, ID: 1}, "--shard-id 1 needs --shards"},
		{Shard{Count: 3, ID: 3}, "--shard-id must be between 0 and 2"},
		{Shard{Count: 3, ID: -1}, "--shard-id must be between 0 and 2"},
		{Shard{Count: Buckets}, ""},
		{Shard{Count: Buckets + 1}, "--shards must be at most 840"},
	} {
		err := tc.shard.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tc.shard, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want an error with %q", tc.shard, err, tc.want)
		}
	}
}

// TestOfIsStable pins the hash: a change would move Kymas between shards
// while an older and a newer operator run side by side (an upgrade), and
// two processes would work on the same Kyma. The values are FNV-1a
// (32 bit) of the names modulo 4, computed apart from Go.
func TestOfIsStable(t *testing.T) {
	for name, want := range map[string]int{"runtime-0": 2, "runtime-1": 1, "runtime-2": 0, "c3a1e7e2-5b0e-4c1d-9b1a-6d0f2e4a8b11": 3} {
		if got := Of(name, 4); got != want {
			t.Errorf("Of(%q, 4) = %d, want %d (FNV-1a of the name modulo the count)", name, got, want)
		}
	}
	if got := Of("runtime-0", 1); got != 0 {
		t.Errorf("Of with one shard = %d, want 0", got)
	}
}

// TestOfAgreesWithEarlierVersions: earlier versions took FNV-1a of the
// name modulo the count, without buckets. For every count that divides
// Buckets (1 to 8 among them), the shards of both versions must agree, so
// that an upgrade at one of those counts moves no Kyma.
func TestOfAgreesWithEarlierVersions(t *testing.T) {
	earlier := func(name string, count int) int {
		h := fnv.New32a()
		_, _ = h.Write([]byte(name))
		return int(h.Sum32() % uint32(count))
	}
	for count := 1; count <= 8; count++ {
		for i := range 2000 {
			name := fmt.Sprintf("kyma-%d", i)
			if got, want := Of(name, count), earlier(name, count); got != want {
				t.Fatalf("Of(%q, %d) = %d, earlier versions said %d", name, count, got, want)
			}
		}
	}
}

// TestEveryKymaHasExactlyOneShardAndShardsAreEven checks that the shards
// partition a fleet and share it evenly enough to be worth running.
func TestEveryKymaHasExactlyOneShardAndShardsAreEven(t *testing.T) {
	const kymas, count = 10000, 3
	sizes := make([]int, count)
	for i := range kymas {
		name := fmt.Sprintf("kyma-%05d", i)
		owners := 0
		for id := range count {
			if (Shard{Count: count, ID: id}).OwnsKyma(name) {
				owners++
				sizes[id]++
			}
		}
		if owners != 1 {
			t.Fatalf("Kyma %s is owned by %d shards, want 1", name, owners)
		}
	}
	for id, n := range sizes {
		if n < kymas/count*9/10 || n > kymas/count*11/10 {
			t.Errorf("shard %d of %d has %d of %d Kymas, want within 10%% of an even share (%v)", id, count, n, kymas, sizes)
		}
	}
}

func TestOwnsGoesByTheKyma(t *testing.T) {
	mine, theirs := nameIn(t, 0), nameIn(t, 1)
	s := Shard{Count: 2, ID: 0}
	labelled := func(kyma string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{v1beta2.KymaNameLabel: kyma}}}
	}
	for _, tc := range []struct {
		what string
		obj  any
		want bool
	}{
		{"its Kyma", &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: mine}}, true},
		{"another shard's Kyma", &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: theirs}}, false},
		{"another shard's Kyma as metadata", kymaMetadata(theirs), false},
		{"a Kyma's Manifest", &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: theirs + "-x", Labels: map[string]string{v1beta2.KymaNameLabel: mine}}}, true},
		{"another shard's Manifest", &v1beta2.Manifest{ObjectMeta: metav1.ObjectMeta{Name: mine + "-x", Labels: map[string]string{v1beta2.KymaNameLabel: theirs}}}, false},
		{"its kubeconfig Secret", labelled(mine), true},
		{"another shard's kubeconfig Secret", labelled(theirs), false},
		{"a deleted object of another shard", toolscache.DeletedFinalStateUnknown{Key: "x", Obj: labelled(theirs)}, false},
		{"a ModuleTemplate, of no Kyma", &v1beta2.ModuleTemplate{ObjectMeta: metav1.ObjectMeta{Name: theirs}}, true},
	} {
		if got := s.Owns(tc.obj); got != tc.want {
			t.Errorf("%s: Owns = %v, want %v", tc.what, got, tc.want)
		}
	}
	if !(Shard{}).Owns(&v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: theirs}}) {
		t.Error("an unsharded operator must own every Kyma")
	}
}

func TestLeaseName(t *testing.T) {
	if got := (Shard{}).LeaseName("lm"); got != "lm" {
		t.Errorf("unsharded Lease %q, want the one an unsharded operator always had", got)
	}
	if got := (Shard{Count: 3, ID: 1}).LeaseName("lm"); got != "lm-shard-1-of-3" {
		t.Errorf("Lease of shard 1 of 3 is %q", got)
	}
}

// nameIn finds a Kyma name of shard id of 2, other than those taken.
func nameIn(t *testing.T, id int, taken ...string) string {
	t.Helper()
	for i := range 100 {
		if name := fmt.Sprintf("kyma-%d", i); Of(name, 2) == id && !slices.Contains(taken, name) {
			return name
		}
	}
	t.Fatalf("no name of shard %d", id)
	return ""
}

func kymaMetadata(name string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
	m.SetGroupVersionKind(v1beta2.GroupVersion.WithKind("Kyma"))
	return m
}

// One process plans the fleet's rollouts: the unsharded one, or shard 0.
func TestPlans(t *testing.T) {
	for _, tc := range []struct {
		shard Shard
		want  bool
	}{
		{Shard{}, true},
		{Shard{Count: 1}, true},
		{Shard{Count: 3, ID: 0}, true},
		{Shard{Count: 3, ID: 1}, false},
		{Shard{Count: 3, ID: 2}, false},
	} {
		if got := tc.shard.Plans(); got != tc.want {
			t.Errorf("%+v.Plans() = %v, want %v", tc.shard, got, tc.want)
		}
	}
}
