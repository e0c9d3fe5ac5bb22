package backup

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	lmbackup "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/backup"
)

// rotatingKey is the key Secret of the rotating schedule.
const rotatingKey = "rotating-key"

// An upgrade and a key rotation, as an SRE does them. The key Secret is one
// of an operator before recipients, with the private key: backups go on,
// encrypted to its public part, and the RuntimeBackup warns until the
// private key is gone. The SRE moves to recipients and adds a new key (old
// and new), then removes the old one. Every backup records the keys it was
// encrypted to, in status and in the registry (lmctl backup list); a
// backup made before the rotation restores with the old identity, one made
// during it with either, one made after it with the new identity only, and
// a refusal names the backup and the keys it needs and changes nothing.
func TestKeyRotation(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	dir := t.TempDir()
	oldPath, oldRecipient, err := writeIdentity(dir, "old.txt")
	Expect(err).NotTo(HaveOccurred())
	newPath, newRecipient, err := writeIdentity(dir, "new.txt")
	Expect(err).NotTo(HaveOccurred())
	oldIdentity := identityLine(oldPath)
	oldFP, newFP := backup.Fingerprint(oldRecipient), backup.Fingerprint(newRecipient)

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: rotatingKey, Namespace: kcpNamespace},
		Data:       map[string][]byte{backup.IdentityKey: []byte(oldIdentity)},
	}
	Expect(env.kcp.Create(ctx, secret)).To(Succeed())
	t.Cleanup(func() { Expect(client.IgnoreNotFound(env.kcp.Delete(ctx, secret))).To(Succeed()) })
	// The clock only moves forward: a name per run keeps earlier runs'
	// backups (-count) out of this one's repository.
	name := "rotating-" + clock.Now().UTC().Format("20060102t1504")
	registerFor(t, "rotating", name, env.runtimes[0])
	t.Cleanup(func() { unregister(name) })

	// Before the rotation: the old Secret still works, with a warning that
	// names what to do and quotes no key.
	Eventually(func(g Gomega) {
		rb := runtimeBackup(g, name)
		g.Expect(rb.Status.State).To(Equal(v1beta2.StateWarning))
		g.Expect(rb.Status.Conditions).To(ContainElement(And(
			HaveField("Type", v1beta2.ConditionReady), HaveField("Reason", v1beta2.ReasonWarning),
			HaveField("Message", And(ContainSubstring("holds a private key"), ContainSubstring(`under "recipients"`), Not(ContainSubstring("AGE-SECRET-KEY")))))))
	}, timeout, interval).Should(Succeed())
	before := backupAtNext(name)
	Expect(runtimeBackup(Default, name).Status.KeyFingerprints).To(Equal([]string{oldFP}))

	// During: the public keys only, old and new.
	setKeys(secret, map[string][]byte{backup.RecipientsKey: []byte("# old, until every backup needing it has expired\n" + oldRecipient + "\n" + newRecipient + "\n")})
	Eventually(func(g Gomega) {
		rb := runtimeBackup(g, name)
		g.Expect(rb.Status.State).To(Equal(v1beta2.StateReady), "no private key any more: no warning")
	}, timeout, interval).Should(Succeed())
	during := backupAtNext(name)
	Expect(runtimeBackup(Default, name).Status.KeyFingerprints).To(ConsistOf(oldFP, newFP))

	// After: the new key only.
	setKeys(secret, map[string][]byte{backup.RecipientsKey: []byte(newRecipient)})
	after := backupAtNext(name)
	rb := runtimeBackup(Default, name)
	Expect(rb.Status.KeyFingerprints).To(Equal([]string{newFP}))
	Expect(rb.Status.Backups).To(ContainElements(
		And(HaveField("Tag", before), HaveField("KeyFingerprints", []string{oldFP})),
		And(HaveField("Tag", after), HaveField("KeyFingerprints", []string{newFP}))))

	opts := lmbackup.Options{KCP: env.kcp, Namespace: kcpNamespace, Kyma: name, Store: env.storeOpt}
	entries, err := lmbackup.List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	Expect(entries).To(HaveExactElements(
		And(HaveField("Backup", after), HaveField("KeyFingerprints", ConsistOf(newFP))),
		And(HaveField("Backup", during), HaveField("KeyFingerprints", ConsistOf(oldFP, newFP))),
		And(HaveField("Backup", before), HaveField("KeyFingerprints", ConsistOf(oldFP)))))

	restore := func(tag string, identities ...string) error {
		o := opts
		o.IdentityFiles = identities
		_, err := lmbackup.Restore(ctx, lmbackup.RestoreOptions{Options: o, Backup: tag, Timeout: timeout})
		return err
	}
	Expect(restore(before, oldPath)).To(Succeed())
	Expect(restore(during, oldPath)).To(Succeed())
	Expect(restore(during, newPath)).To(Succeed())
	Expect(restore(after, newPath)).To(Succeed())
	Expect(restore(after, newPath, oldPath)).To(Succeed(), "several identity files: any one that matches")

	// A channel the backups do not have: a restore that went through would
	// set it back to theirs.
	Eventually(func(g Gomega) {
		kyma := &v1beta2.Kyma{}
		g.Expect(env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, kyma)).To(Succeed())
		kyma.Spec.Channel = "fast"
		g.Expect(env.kcp.Update(ctx, kyma)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	for _, refused := range []struct{ tag, identity, needs string }{{after, oldPath, newFP}, {before, newPath, oldFP}} {
		err := restore(refused.tag, refused.identity)
		Expect(errors.Is(err, backup.ErrWrongKey)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring(name+":"+refused.tag), ContainSubstring("fingerprints "+refused.needs+";")))
		Expect(err.Error()).NotTo(ContainSubstring("AGE-SECRET-KEY"))
	}
	kyma := &v1beta2.Kyma{}
	Expect(env.kcp.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: name}, kyma)).To(Succeed())
	Expect(kyma.Spec.Channel).To(Equal("fast"), "a refused restore writes nothing")
}

// identityLine is the identity an identity file holds (writeIdentity's:
// one).
func identityLine(path string) string {
	raw, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "AGE-SECRET-KEY-") {
			return strings.TrimSpace(line)
		}
	}
	panic("no identity in " + path)
}

// setKeys replaces the key Secret's data, as `kubectl apply` of a new
// version of it does.
func setKeys(secret *corev1.Secret, data map[string][]byte) {
	Eventually(func(g Gomega) {
		g.Expect(env.kcp.Get(context.Background(), client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		secret.Data = data
		g.Expect(env.kcp.Update(context.Background(), secret)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}
