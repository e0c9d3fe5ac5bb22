package backup

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// Against a registry that hands out bearer tokens (as Docker Hub and
// Harbor do), lmctl logs in with a docker config or a user and lists the
// backups with their keys; without credentials it is refused with what to
// give. (test/backup does the same with the operator's Secret and basic
// auth, end to end.)
func TestListFromTokenRegistry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	reg := testregistry.Start(testregistry.WithTokenAuth("reader", "pw"))
	defer reg.Close()
	repository := reg.Host() + "/backups"
	insecure := []string{reg.Host()}

	_, recipient, err := backup.NewIdentity()
	g.Expect(err).NotTo(HaveOccurred())
	recipients, err := backup.ParseRecipients(recipient, "test")
	g.Expect(err).NotTo(HaveOccurred())
	pusher := backup.NewStore(repository, backup.StoreOptions{InsecureRegistries: insecure,
		Keychain: staticKeychain{authn.FromConfig(authn.AuthConfig{Username: "reader", Password: "pw"})}})
	taken := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	_, err = backup.Save(ctx, pusher, recipients, &backup.Snapshot{Format: backup.FormatVersion, Kyma: "k1", TakenAt: taken})
	g.Expect(err).NotTo(HaveOccurred())

	dockerConfig := filepath.Join(t.TempDir(), "config.json")
	g.Expect(os.WriteFile(dockerConfig, reg.DockerConfigJSON(), 0o600)).To(Succeed())
	opts := Options{Kyma: "k1", Repository: repository, Store: backup.StoreOptions{InsecureRegistries: insecure}}
	for _, creds := range []Credentials{{DockerConfig: dockerConfig}, {Username: "reader", Password: "pw"}} {
		o := opts
		o.Credentials = creds
		entries, err := List(ctx, o)
		g.Expect(err).NotTo(HaveOccurred(), "%+v", creds.given())
		g.Expect(entries).To(ConsistOf(And(HaveField("Backup", backup.Tag(taken)), HaveField("KeyFingerprints", recipients.Fingerprints()))))
	}
	_, err = List(ctx, opts)
	g.Expect(err).To(MatchError(And(ContainSubstring("refused to let lmctl read "+repository+"/k1 anonymously"), ContainSubstring("--docker-config FILE"))))
	o := opts
	o.Credentials = Credentials{Username: "reader"}
	_, err = List(ctx, o)
	g.Expect(err).To(MatchError(ContainSubstring("--registry-username without a password: set $" + PasswordEnv)))
}
