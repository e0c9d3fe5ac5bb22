package lmctl

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	lmbackup "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
)

func newBackupCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "List a runtime's backups and restore one into a recreated runtime",
		Long: `The operator backs up what a runtime owner cannot get back from the control plane
(the Kyma's module choices, the modules' custom resources) on the schedules of
--backup-schedules, encrypted, into an OCI registry (docs/operations.md,
"Backups and restore"). These commands read the registry, logged in as the
operator pushes (its --registry-credentials-secret, a docker config, or a user
and password), and restore decrypts with the age identity you hold (--identity).`,
	}
	cmd.AddCommand(newBackupListCommand(), newBackupRestoreCommand())
	return cmd
}

// backupFlags locate a Kyma's backups and log in to their registry.
type backupFlags struct {
	kube          kubeFlags
	repository    string
	insecure      []string
	credentials   lmbackup.Credentials
	passwordStdin bool
}

func (f *backupFlags) bind(fs *pflag.FlagSet) {
	f.kube.bind(fs)
	fs.StringVar(&f.repository, "repository", "", "OCI repository of the backups (default: the one the Kyma's RuntimeBackup names).")
	fs.StringSliceVar(&f.insecure, "insecure-registries", nil, "Registry hosts (host:port) reached over plain HTTP, e.g. lmctl dev's local registry.")
	fs.StringVar(&f.credentials.Secret, "registry-credentials-secret", "", "Log in to the registry with this kubernetes.io/dockerconfigjson Secret in --namespace: the operator's --registry-credentials-secret.")
	fs.StringVar(&f.credentials.DockerConfig, "docker-config", "", "Log in to the registry with this docker config file (config.json, or a directory holding one). Default: the docker default (~/.docker/config.json, $DOCKER_CONFIG, credential helpers).")
	fs.StringVar(&f.credentials.Username, "registry-username", "", "Log in to the registry as this user, the password from $"+lmbackup.PasswordEnv+" or --registry-password-stdin.")
	fs.BoolVar(&f.passwordStdin, "registry-password-stdin", false, "Read the --registry-username's password from stdin (one line).")
}

func (f *backupFlags) options(cmd *cobra.Command, kyma string) (lmbackup.Options, error) {
	insecure, err := registryHosts(f.insecure)
	if err != nil {
		return lmbackup.Options{}, err
	}
	creds := f.credentials
	if creds.Password, err = f.password(cmd.InOrStdin()); err != nil {
		return lmbackup.Options{}, err
	}
	c, err := f.kube.client()
	if err != nil {
		return lmbackup.Options{}, err
	}
	return lmbackup.Options{
		KCP: c, Namespace: f.kube.namespace, Kyma: kyma,
		Repository: f.repository, Credentials: creds,
		Store: backup.StoreOptions{InsecureRegistries: insecure},
	}, nil
}

// password is the registry password: from stdin when asked, else from the
// environment; never a flag, which the process list and shell history
// would show.
func (f *backupFlags) password(stdin io.Reader) (string, error) {
	if f.passwordStdin {
		if f.credentials.Username == "" {
			return "", errors.New("--registry-password-stdin without --registry-username: name the user too")
		}
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the password from stdin: %w", err)
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	if f.credentials.Username == "" {
		return "", nil
	}
	return os.Getenv(lmbackup.PasswordEnv), nil
}

func newBackupListCommand() *cobra.Command {
	var (
		flags  backupFlags
		format = output.Table
	)
	cmd := &cobra.Command{
		Use:     "list KYMA",
		Short:   "List a runtime's backups, newest first: time, tag, size and the keys each is encrypted to",
		Example: "  lmctl backup list my-runtime --registry-credentials-secret registry-credentials\n  lmctl backup list my-runtime -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := flags.options(cmd, args[0])
			if err != nil {
				return err
			}
			entries, err := lmbackup.List(cmd.Context(), opts)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if format != output.Table {
				return output.Structured(w, format, entries)
			}
			if len(entries) == 0 {
				_, err := fmt.Fprintf(w, "No backups of Kyma %s.\n", args[0])
				return err
			}
			tw := output.NewTabWriter(w)
			fmt.Fprintln(tw, "BACKUP\tTIME\tSIZE\tKEYS")
			for _, e := range entries {
				keys := strings.Join(e.KeyFingerprints, ",")
				if keys == "" {
					keys = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", e.Backup, e.Time.Format(time.RFC3339), e.Size, keys)
			}
			return tw.Flush()
		},
	}
	flags.bind(cmd.Flags())
	cmd.Flags().VarP(&format, "output", "o", "Output format: table, json or yaml.")
	return cmd
}

func newBackupRestoreCommand() *cobra.Command {
	var (
		flags      backupFlags
		format     = output.Table
		tag        string
		timeout    time.Duration
		identities []string
		keySecret  string
	)
	cmd := &cobra.Command{
		Use:   "restore KYMA",
		Short: "Restore a backup into the runtime the Kyma now stands for",
		Long: `Register the new runtime first: its kubeconfig Secret and a Kyma of the same name.
restore then puts the backup's modules into the Kyma and, in the runtime and in
this order: the runtime owner's choices into the runtime's own Kyma once the
operator created it, the Namespaces and Secrets the backup's custom resources
need, and the custom resources of the modules' CRDs once the modules installed
them. It creates only: what the runtime has already is skipped and left as it
is (a module's default custom resource that nobody changed since the operator
created it is replaced). It reports, per object, created, updated, skipped or
failed with the reason. Without --backup it restores the newest backup taken
before the Kyma was created. It decrypts with the age identities of --identity
(the operator holds only their public keys); identities the backup was not
encrypted to are refused, naming the fingerprints it needs, and change nothing.`,
		Example: "  lmctl backup restore my-runtime --identity backup-key.txt --registry-credentials-secret registry-credentials\n" +
			"  lmctl backup restore my-runtime --identity new.txt --identity old.txt --backup 20261201T100000Z --docker-config ~/.docker/config.json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := flags.options(cmd, args[0])
			if err != nil {
				return err
			}
			opts.IdentityFiles, opts.KeySecret = identities, keySecret
			ro := lmbackup.RestoreOptions{Options: opts, Backup: tag, Timeout: timeout}
			if format == output.Table {
				ro.Progress = cmd.OutOrStdout()
			}
			res, err := lmbackup.Restore(cmd.Context(), ro)
			if err != nil && !errors.Is(err, lmbackup.ErrIncomplete) {
				return err
			}
			// A restore that ran through shows what it did with each
			// object, failures included, before it exits with its error.
			var printErr error
			if format != output.Table {
				printErr = output.Structured(cmd.OutOrStdout(), format, res)
			} else {
				printErr = res.WriteTable(cmd.OutOrStdout())
			}
			return cmp.Or(err, printErr)
		},
	}
	flags.bind(cmd.Flags())
	cmd.Flags().StringArrayVar(&identities, "identity", nil, "Age identity file (AGE-SECRET-KEY-1…, one or more a file, as age-keygen writes) that decrypts the backup; repeat for several.")
	cmd.Flags().StringVar(&keySecret, "key-secret", "", "Instead of --identity: the Secret in --namespace that still holds the private key under \"identity\", as operators before recipients required.")
	cmd.Flags().StringVar(&tag, "backup", "", "Tag of the backup to restore (lmctl backup list); default: the newest from before the Kyma was created.")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "Longest wait for the operator to create the runtime's Kyma and install the modules' CRDs.")
	cmd.Flags().VarP(&format, "output", "o", "Output format: table (with progress), json or yaml.")
	return cmd
}

// registryHosts reads --insecure-registries entries as the operator does
// (fetch.ParseRegistryHost): trimmed and lower-cased, so that " localhost:5000"
// after a comma and a space still matches; a malformed entry is an error.
func registryHosts(entries []string) ([]string, error) {
	hosts := make([]string, 0, len(entries))
	for i, entry := range entries {
		host, err := fetch.ParseRegistryHost(entry)
		if err != nil {
			return nil, fmt.Errorf("--insecure-registries entry %d: %w", i+1, err)
		}
		hosts = append(hosts, host)
	}
	return hosts, nil
}
