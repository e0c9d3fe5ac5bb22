package backup

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// A backup goes into a real registry encrypted to a recipient, records its
// fingerprint, comes back with the identity, is refused with another, and
// thinning deletes exactly what the retention drops.
func TestSaveOpenThin(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := testregistry.Start()
	defer reg.Close()
	store := NewStore(reg.Host()+"/backups", StoreOptions{InsecureRegistries: []string{reg.Host()}})

	key, recipients := newKey(t, "key.txt")

	base := time.Date(2026, 4, 5, 20, 0, 0, 0, time.UTC)
	for i := range 4 {
		s := &Snapshot{Format: FormatVersion, Kyma: "k1", TakenAt: base.Add(time.Duration(i) * time.Hour),
			Spec: v1beta2.KymaSpec{Channel: "regular", Modules: []v1beta2.Module{{Name: "sample", Managed: true}}}}
		info, err := Save(ctx, store, recipients, s)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.Tag).To(Equal(Tag(s.TakenAt)))
		g.Expect(info.Size).To(BeNumerically(">", 0))
	}
	infos, err := store.List(ctx, "k1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(infos).To(HaveLen(4))
	g.Expect(infos[0].Tag).To(Equal("20260405T200000Z"), "oldest first")

	sealed, err := store.Fetch(ctx, "k1", infos[0].Tag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(sealed.Data)).NotTo(ContainSubstring("sample"), "stored encrypted")
	g.Expect(sealed.KeyFingerprints).To(Equal(recipients.Fingerprints()))
	described, err := store.Describe(ctx, "k1", infos[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(described.KeyFingerprints).To(Equal(recipients.Fingerprints()), "in the artifact's annotations")

	s, err := Open(ctx, store, key, "k1", infos[3].Tag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Spec.Modules).To(ConsistOf(HaveField("Name", "sample")))

	wrong, wrongRecipients := newKey(t, "other.txt")
	_, err = Open(ctx, store, wrong, "k1", infos[3].Tag)
	g.Expect(errors.Is(err, ErrWrongKey)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(store.Ref("k1", infos[3].Tag)))
	g.Expect(err.Error()).To(ContainSubstring(recipients.Fingerprints()[0]), "the key it needs")
	g.Expect(err.Error()).To(ContainSubstring(wrongRecipients.Fingerprints()[0]), "the key given")
	g.Expect(err.Error()).To(ContainSubstring("other.txt"))
	g.Expect(err.Error()).NotTo(ContainSubstring("AGE-SECRET-KEY"))

	// Keep the newest two hours only.
	left, err := Thin(ctx, store, "k1", base.Add(3*time.Hour+time.Minute), Retention{Hourly: 2}, time.UTC)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(HaveLen(2))
	infos, err = store.List(ctx, "k1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(infos).To(HaveLen(2))
	g.Expect(infos[0].Tag).To(Equal("20260405T220000Z"))
	_, err = store.Fetch(ctx, "k1", "20260405T200000Z")
	g.Expect(err).To(MatchError(ContainSubstring("does not exist")))

	g.Expect(store.DeleteAll(ctx, "k1")).To(Succeed())
	infos, err = store.List(ctx, "k1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(infos).To(BeEmpty())
	none, err := store.List(ctx, "never-backed-up")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeEmpty())
}
