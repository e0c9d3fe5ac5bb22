package backup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newKey writes a new identity file named name in a temporary directory
// and returns the identities read from it and its recipient.
func newKey(t *testing.T, name string) (*Identities, Recipients) {
	t.Helper()
	identity, recipient, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte("# a test key\n"+identity+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ids, err := ReadIdentityFiles([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseRecipients(recipient, "test")
	if err != nil {
		t.Fatal(err)
	}
	return ids, rs
}

func TestParseRecipients(t *testing.T) {
	identity, recipient, err := NewIdentity()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, other, _ := NewIdentity()
	for _, tt := range []struct {
		name, text string
		want       int
		err        string
	}{
		{name: "one", text: recipient, want: 1},
		{name: "a file with comments, blank lines and a repeat", text: "# old\n" + recipient + "\n\n# new\n  " + other + "\n" + recipient + "\n", want: 2},
		{name: "a private key", text: recipient + "\n" + identity, err: "line 2: this is an age identity, a private key: give its public key (age-keygen -y"},
		{name: "not a key", text: "ssh-ed25519 AAAA", err: "line 1: not an age recipient"},
		{name: "empty", text: "# nothing\n", err: "lists no recipient"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rs, err := ParseRecipients(tt.text, "the list")
			if tt.err != "" {
				g.Expect(err).To(MatchError(And(ContainSubstring("the list"), ContainSubstring(tt.err))))
				g.Expect(err.Error()).NotTo(ContainSubstring(strings.TrimPrefix(identity, "AGE-SECRET-KEY-1")), "never quotes a private key")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rs.Len()).To(Equal(tt.want))
			g.Expect(rs.Fingerprints()).To(HaveLen(tt.want))
		})
	}
}

func TestReadKeySecret(t *testing.T) {
	identity, recipient, err := NewIdentity()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, other, _ := NewIdentity()
	for _, tt := range []struct {
		name          string
		data          map[string]string
		want          []string
		holdsIdentity bool
		err           string
	}{
		{name: "recipients", data: map[string]string{RecipientsKey: recipient + "\n" + other}, want: []string{recipient, other}},
		{name: "an old Secret: the identity's public part, with a warning", data: map[string]string{IdentityKey: identity}, want: []string{recipient}, holdsIdentity: true},
		{name: "recipients win over an identity left behind", data: map[string]string{RecipientsKey: other, IdentityKey: identity}, want: []string{other}, holdsIdentity: true},
		{name: "neither", data: map[string]string{"key": "x"}, err: `kcp-system/k has no key "recipients"`},
		{name: "a broken identity", data: map[string]string{IdentityKey: "AGE-SECRET-KEY-1NOTAKEY"}, err: `key "identity" of the key Secret kcp-system/k`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kcp-system", Name: "k"}, Data: map[string][]byte{}}
			for k, v := range tt.data {
				secret.Data[k] = []byte(v)
			}
			ks, err := ReadKeySecret(secret)
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				g.Expect(err.Error()).NotTo(ContainSubstring("NOTAKEY"))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			want := make([]string, len(tt.want))
			for i, r := range tt.want {
				want[i] = Fingerprint(r)
			}
			g.Expect(ks.Recipients.Fingerprints()).To(ConsistOf(want))
			g.Expect(ks.HoldsIdentity).To(Equal(tt.holdsIdentity))
		})
	}
}

// A backup encrypted to two recipients (a rotation under way) opens with
// either identity, and with an identity file that holds several; a third
// is refused naming both fingerprints it needs.
func TestEncryptToSeveral(t *testing.T) {
	g := NewWithT(t)
	oldKey, oldRecipient := newKey(t, "old.txt")
	newKeyIDs, newRecipient := newKey(t, "new.txt")
	stranger, _ := newKey(t, "stranger.txt")
	both := oldRecipient.Union(newRecipient)
	g.Expect(both.Len()).To(Equal(2))

	cipher, err := both.Encrypt([]byte("snapshot"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, ids := range []*Identities{oldKey, newKeyIDs} {
		plain, err := ids.Decrypt("r/k:t", both.Fingerprints(), cipher)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(plain)).To(Equal("snapshot"))
	}
	_, err = stranger.Decrypt("r/k:t", both.Fingerprints(), cipher)
	g.Expect(errors.Is(err, ErrWrongKey)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("r/k:t is encrypted to the keys with fingerprints " + strings.Join(both.Fingerprints(), ", ")))
}

func TestReadIdentityFilesRefusesWhatIsNotAnIdentity(t *testing.T) {
	g := NewWithT(t)
	_, recipient, _ := NewIdentity()
	path := filepath.Join(t.TempDir(), "public.txt")
	g.Expect(os.WriteFile(path, []byte(recipient+"\n"), 0o600)).To(Succeed())
	_, err := ReadIdentityFiles([]string{path})
	g.Expect(err).To(MatchError(And(ContainSubstring("public.txt"), ContainSubstring("line 1"), ContainSubstring("AGE-SECRET-KEY-1…"))))
	_, err = ReadIdentityFiles(nil)
	g.Expect(err).To(MatchError(ContainSubstring("--identity FILE")))
}

// Post-quantum recipients work, and age refuses to mix them with classic
// ones (docs/operations.md says a schedule takes one kind).
func TestPostQuantumRecipientsDoNotMix(t *testing.T) {
	g := NewWithT(t)
	pq, err := age.GenerateHybridIdentity()
	g.Expect(err).NotTo(HaveOccurred())
	pqRecipients, err := ParseRecipients(pq.Recipient().String(), "test")
	g.Expect(err).NotTo(HaveOccurred())
	cipher, err := pqRecipients.Encrypt([]byte("snapshot"))
	g.Expect(err).NotTo(HaveOccurred())
	ids := &Identities{age: []age.Identity{pq}, recipients: []string{pq.Recipient().String()}, From: "test"}
	plain, err := ids.Decrypt("r/k:t", pqRecipients.Fingerprints(), cipher)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(plain)).To(Equal("snapshot"))

	_, classic := newKey(t, "classic.txt")
	_, err = pqRecipients.Union(classic).Encrypt([]byte("snapshot"))
	g.Expect(err).To(MatchError(ContainSubstring("encrypting")))
}
