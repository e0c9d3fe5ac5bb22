// Package backup runs runtime backups and restore (SPEC G5) through the
// whole operator, with a fake clock, against a real control plane, two
// real runtime API servers and a real registry: a runtime is backed up,
// deleted, registered again on another cluster and restored; hourly, daily
// and weekly backups thin out to exactly the grandfather-father-son set; a
// deleted runtime's backups last for the grace period and no longer; the
// operator pushes to a registry that requires a login with its credentials
// Secret and lmctl reads there with the same credentials (private_test.go);
// the operator holds public keys only, and they rotate (keys_test.go).
package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
	"github.com/runtime-fleet/lifecycle-manager/internal/testenv"
	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

const (
	kcpNamespace = "kcp-system"
	keySecret    = "backup-key"
	gracePeriod  = 48 * time.Hour
	// registryCredentials is the operator's --registry-credentials-secret:
	// the login to the private registry.
	registryCredentials = "registry-credentials"
	// The private registry's user and password.
	privateUser     = "backup-writer"
	privatePassword = "not-in-any-message"
)

// The operator's clock starts on Monday 2026-01-05, 00:30 UTC; tests move
// it forwards only.
var clock = clocktesting.NewFakePassiveClock(time.Date(2026, 1, 5, 0, 30, 0, 0, time.UTC))

// Kymas labelled backup=hourly are backed up every hour, with the default
// retention and the Secrets their custom resources refer to, to the
// recipients of the key Secret; backup=private into the registry that
// requires a login, to a recipient the schedule lists; backup=rotating to
// the recipients of a key Secret each test writes.
const schedulesYAML = `
schedules:
  - name: hourly
    selector: {matchLabels: {backup: hourly}}
    schedule: "0 * * * *"
    repository: %[1]s/backups
    keySecret: backup-key
    includeSecrets: true
  - name: private
    selector: {matchLabels: {backup: private}}
    schedule: "0 * * * *"
    repository: %[2]s/backups
    recipients: [%[3]s]
  - name: rotating
    selector: {matchLabels: {backup: rotating}}
    schedule: "0 * * * *"
    repository: %[1]s/backups
    keySecret: rotating-key
`

var env struct {
	kcp      client.Client
	registry *testregistry.Registry
	// private requires a login (basic auth); the operator has it in its
	// registry credentials Secret.
	private *testregistry.Registry
	// identity is the file of the SRE's identity, whose recipient the
	// hourly and private schedules encrypt to; the operator never sees it.
	identity string
	runtimes []*testcluster.Runtime
	rt       []client.Client
	store    *backup.Store
	storeOpt backup.StoreOptions
	// schedules are the operator's.
	schedules *backup.Schedules
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Config{Name: "backup", Runtimes: 2, Namespace: kcpNamespace}, setup)
}

func setup(ctx context.Context, e *testenv.Env) (operator.Options, error) {
	env.kcp, env.runtimes = e.Client, e.Runtimes
	for _, r := range e.Runtimes {
		c, err := testenv.NewClient(r.Config())
		if err != nil {
			return operator.Options{}, err
		}
		env.rt = append(env.rt, c)
	}
	env.registry = testregistry.Start()
	e.Cleanup(env.registry.Close)
	env.private = testregistry.Start(testregistry.WithBasicAuth(privateUser, privatePassword))
	e.Cleanup(env.private.Close)
	env.storeOpt = backup.StoreOptions{InsecureRegistries: []string{env.registry.Host()}}
	env.store = backup.NewStore(env.registry.Host()+"/backups", env.storeOpt)

	for _, module := range []string{samplemodules.Sample, samplemodules.Evolving} {
		v, err := samplemodules.Get(module, "1.0.0")
		if err != nil {
			return operator.Options{}, err
		}
		artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:1.0.0", env.registry.Host(), module), v.Content.Layers(), ociartifact.Insecure())
		if err != nil {
			return operator.Options{}, err
		}
		if err := e.Client.Create(ctx, v.Template(kcpNamespace, artifact.Links)); err != nil {
			return operator.Options{}, err
		}
		if err := e.Client.Create(ctx, samplemodules.ReleaseMeta(kcpNamespace, module, map[string]string{"regular": "1.0.0"})); err != nil {
			return operator.Options{}, err
		}
	}
	dir, err := os.MkdirTemp("", "backup-keys-")
	if err != nil {
		return operator.Options{}, err
	}
	e.Cleanup(func() { _ = os.RemoveAll(dir) })
	var recipient string
	if env.identity, recipient, err = writeIdentity(dir, "sre.txt"); err != nil {
		return operator.Options{}, err
	}
	for _, secret := range []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Name: keySecret, Namespace: kcpNamespace},
			Data:       map[string][]byte{backup.RecipientsKey: []byte(recipient)},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: registryCredentials, Namespace: kcpNamespace},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: env.private.DockerConfigJSON()},
		},
	} {
		if err := e.Client.Create(ctx, secret); err != nil {
			return operator.Options{}, err
		}
	}

	opts := e.OperatorOptions()
	opts.Content.InsecureRegistries = []string{env.registry.Host(), env.private.Host()}
	opts.Content.RegistryCredentialsSecret = registryCredentials
	opts.CatalogSync = false
	opts.Clock = clock
	if opts.Backup.Schedules, err = backup.Parse(fmt.Appendf(nil, schedulesYAML, env.registry.Host(), env.private.Host(), recipient)); err != nil {
		return operator.Options{}, err
	}
	env.schedules = opts.Backup.Schedules
	opts.Backup.GracePeriod = gracePeriod
	// One backup at a time, whatever the budget says: due backups beyond
	// it wait their turn (TestDueBackupsWaitForTheBudget).
	opts.Backup.MaxConcurrency = 1
	// The fake clock moves in steps; each step is seen within this.
	opts.Backup.Poll = 200 * time.Millisecond
	return opts, nil
}

// writeIdentity writes a new age identity file into dir, as age-keygen
// does, and returns its path and recipient.
func writeIdentity(dir, name string) (path, recipient string, err error) {
	identity, recipient, err := backup.NewIdentity()
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(dir, name)
	content := "# public key: " + recipient + "\n" + identity + "\n"
	return path, recipient, os.WriteFile(path, []byte(content), 0o600)
}
