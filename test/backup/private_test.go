package backup

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	lmbackup "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/backup"
)

// The operator pushes backups to a registry that requires a login, with its
// registry credentials Secret. lmctl lists and restores them logged in the
// same way: with that Secret read through the kubeconfig, with a docker
// config file, or as a user whose password comes from the environment. A
// lmctl without credentials, or with a wrong password, is refused with a
// message that names the ways to log in and quotes no password.
func TestRestoreFromPrivateRegistry(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	// No docker config of the machine's user: "no credentials" is that.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", home)
	dockerConfig := filepath.Join(t.TempDir(), "config.json")
	Expect(os.WriteFile(dockerConfig, env.private.DockerConfigJSON(), 0o600)).To(Succeed())

	name := "private-" + clock.Now().UTC().Format("20060102t1504")
	registerFor(t, "private", name, env.runtimes[0])
	t.Cleanup(func() { unregister(name) })
	tag := backupAtNext(name)
	rb := runtimeBackup(Default, name)
	Expect(rb.Status.Repository).To(Equal(env.private.Host() + "/backups"))
	fingerprints := rb.Status.KeyFingerprints
	Expect(fingerprints).To(HaveLen(1))

	options := func(creds lmbackup.Credentials) lmbackup.Options {
		return lmbackup.Options{
			KCP: env.kcp, Namespace: kcpNamespace, Kyma: name, Credentials: creds,
			IdentityFiles: []string{env.identity},
			Store:         backup.StoreOptions{InsecureRegistries: []string{env.private.Host()}},
		}
	}
	for _, login := range []struct {
		name  string
		creds lmbackup.Credentials
	}{
		{"the operator's Secret", lmbackup.Credentials{Secret: registryCredentials}},
		{"a docker config", lmbackup.Credentials{DockerConfig: dockerConfig}},
		{"a docker config directory", lmbackup.Credentials{DockerConfig: filepath.Dir(dockerConfig)}},
		{"a user and password", lmbackup.Credentials{Username: privateUser, Password: privatePassword}},
	} {
		entries, err := lmbackup.List(ctx, options(login.creds))
		Expect(err).NotTo(HaveOccurred(), login.name)
		Expect(entries).To(ContainElement(And(HaveField("Backup", tag), HaveField("KeyFingerprints", fingerprints))), login.name)
	}
	for _, login := range []struct {
		name  string
		creds lmbackup.Credentials
	}{
		{"the operator's Secret", lmbackup.Credentials{Secret: registryCredentials}},
		{"a docker config", lmbackup.Credentials{DockerConfig: dockerConfig}},
	} {
		res, err := lmbackup.Restore(ctx, lmbackup.RestoreOptions{Options: options(login.creds), Backup: tag, Timeout: timeout})
		Expect(err).NotTo(HaveOccurred(), login.name)
		Expect(res.Backup).To(Equal(tag))
	}

	for _, refused := range []struct {
		name  string
		creds lmbackup.Credentials
		as    string
	}{
		{"no credentials", lmbackup.Credentials{}, "anonymously (the docker default credentials have none for " + env.private.Host() + ")"},
		{"a wrong password", lmbackup.Credentials{Username: privateUser, Password: "guessed"}, "logged in as the user " + privateUser},
	} {
		_, err := lmbackup.List(ctx, options(refused.creds))
		Expect(err).To(MatchError(And(
			ContainSubstring("the registry refused to let lmctl read "+env.private.Host()+"/backups/"+name+" "+refused.as+" (401 Unauthorized)"),
			ContainSubstring("--registry-credentials-secret NAME"), ContainSubstring("--docker-config FILE"),
			ContainSubstring("--registry-username USER"), ContainSubstring("$"+lmbackup.PasswordEnv))), refused.name)
		Expect(err.Error()).NotTo(Or(ContainSubstring(privatePassword), ContainSubstring("guessed")))
		_, err = lmbackup.Restore(ctx, lmbackup.RestoreOptions{Options: options(refused.creds), Backup: tag, Timeout: timeout})
		Expect(err).To(MatchError(ContainSubstring(name+" "+refused.as+" (401 Unauthorized)")), refused.name)
	}

	_, err := lmbackup.List(ctx, options(lmbackup.Credentials{Secret: "no-such-secret"}))
	Expect(err).To(MatchError(ContainSubstring("the registry credentials Secret kcp-system/no-such-secret does not exist")))
	_, err = lmbackup.List(ctx, options(lmbackup.Credentials{Secret: registryCredentials, Username: privateUser}))
	Expect(err).To(MatchError(ContainSubstring("give registry credentials one way only")))
}
