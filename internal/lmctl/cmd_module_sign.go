package lmctl

import (
	"fmt"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/cobra"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

// registryFlags reach a registry as a module team's tools do: credentials
// from the docker config (docker login), plain HTTP for listed hosts.
type registryFlags struct {
	insecure []string
}

func (f *registryFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&f.insecure, "insecure-registries", nil, "Registry hosts (host:port) reached over plain HTTP, e.g. lmctl dev's local registry.")
}

func (f *registryFlags) options(ref string) []ociartifact.Option {
	opts := []ociartifact.Option{ociartifact.WithKeychain(authn.DefaultKeychain)}
	host, _, _ := strings.Cut(strings.TrimPrefix(ref, "oci://"), "/")
	for _, h := range f.insecure {
		// Read as the operator reads them; a malformed entry matches nothing.
		// A host listed alone covers all its ports.
		listed, err := fetch.ParseRegistryHost(h)
		name, _, splitErr := net.SplitHostPort(strings.ToLower(host))
		if err == nil && (listed == strings.ToLower(host) || (splitErr == nil && listed == name)) {
			opts = append(opts, ociartifact.Insecure())
			break
		}
	}
	return opts
}

func newModuleSignCommand() *cobra.Command {
	var (
		keyFile string
		flags   registryFlags
	)
	cmd := &cobra.Command{
		Use:   "sign REF --key FILE",
		Short: "Sign a pushed module artifact with a key, as cosign does",
		Long: `sign signs the module artifact REF (host/repo:tag or host/repo@sha256:…, as
pushed) with the private key in FILE and pushes the signature next to it, in
cosign's format: the tag sha256-<digest>.sig holds a simple-signing payload
of the artifact's digest with its signature. Other signatures are kept;
signing again with the same key changes nothing.

FILE is a PEM private key: cosign's (cosign generate-key-pair; its password
in $COSIGN_PASSWORD, unset for none) or a plain PRIVATE KEY / EC PRIVATE KEY,
such as 'openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt'.
The operator installs the module from a registry that requires signatures
(--require-signatures HOST=PUBKEYFILE) only when the signature verifies with
PUBKEYFILE; 'cosign verify --key cosign.pub --insecure-ignore-tlog REF'
accepts it too. Registry credentials come from the docker config.`,
		Example: "  lmctl module sign registry.example.com/modules/keda:1.2.0 --key cosign.key",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return fmt.Errorf("--key is required: a PEM private key file (cosign.key)")
			}
			signer, err := signing.LoadSignerFile(keyFile)
			if err != nil {
				return err
			}
			signed, err := signing.Sign(cmd.Context(), args[0], signer, flags.options(args[0])...)
			if err != nil {
				return err
			}
			verb := "Signed"
			if !signed.Added {
				verb = "Already signed with this key:"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s (signature %s)\n", verb, signed.Artifact, signed.Signature)
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "PEM private key file to sign with (cosign.key, or PRIVATE KEY / EC PRIVATE KEY).")
	flags.bind(cmd)
	return cmd
}

func newModuleVerifyCommand() *cobra.Command {
	var (
		keyFiles []string
		flags    registryFlags
	)
	cmd := &cobra.Command{
		Use:   "verify REF --key PUBKEYFILE",
		Short: "Check a module artifact's signature as the operator does",
		Long: `verify checks that the module artifact REF (host/repo:tag or host/repo@sha256:…)
carries a cosign signature made with one of the given public keys (PEM,
cosign.pub): what the operator checks for a registry listed in
--require-signatures.`,
		Example: "  lmctl module verify registry.example.com/modules/keda:1.2.0 --key cosign.pub",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(keyFiles) == 0 {
				return fmt.Errorf("--key is required: a PEM public key file (cosign.pub)")
			}
			keys := make([]signature.Verifier, 0, len(keyFiles))
			for _, f := range keyFiles {
				k, err := signing.LoadVerifierFile(f)
				if err != nil {
					return err
				}
				keys = append(keys, k)
			}
			opts := flags.options(args[0])
			nameOpts, remoteOpts := ociartifact.Remote(cmd.Context(), opts...)
			ref, err := name.ParseReference(strings.TrimPrefix(args[0], "oci://"), nameOpts...)
			if err != nil {
				return fmt.Errorf("parsing %q: %w", args[0], err)
			}
			desc, err := remote.Head(ref, remoteOpts...)
			if err != nil {
				return fmt.Errorf("looking up %s: %w", ref, ociartifact.WithoutBody(err))
			}
			artifact := ref.Context().Digest(desc.Digest.String())
			if err := signing.Verify(cmd.Context(), artifact, keys, opts...); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Verified %s\n", artifact)
			return err
		},
	}
	cmd.Flags().StringSliceVar(&keyFiles, "key", nil, "PEM public key file(s) (cosign.pub); any of them will do.")
	flags.bind(cmd)
	return cmd
}
