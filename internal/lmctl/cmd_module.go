package lmctl

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/cobra"

	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/module"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/signing"
)

func newModuleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "module",
		Short: "Package, publish and sign a module: init, build, push, sign, verify",
		Long: `Package and publish a module version (docs/modules.md, "The module team's journey").

  lmctl module init DIR --name NAME   scaffold a module repository from the template operator
  lmctl module build                  render module.yaml's content into an OCI layout, a layer per part
  lmctl module push --registry HOST   push it and print its ModuleTemplate and ModuleReleaseMeta
  lmctl module sign REF --key FILE    sign the pushed artifact (cosign's format; docs/security.md)
  lmctl module verify REF --key FILE  check its signature`,
	}
	cmd.AddCommand(newModuleInitCommand(), newModuleBuildCommand(), newModulePushCommand(), newModuleSignCommand(), newModuleVerifyCommand())
	return cmd
}

func newModuleInitCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "init DIR --name NAME",
		Short: "Scaffold a new module repository from the template operator",
		Example: `  lmctl module init ./my-module --name my-module
  cd my-module && lmctl module build`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := module.Init(args[0], name)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Scaffolded module %s in %s:\n", name, args[0])
			for _, f := range files {
				fmt.Fprintf(out, "  %s\n", f)
			}
			fmt.Fprintln(out, "Next: edit module.yaml and config/, then run lmctl module build and lmctl module push.")
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "The module's name (a DNS label).")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// moduleFlags are what build and push share: the module.yaml and the layout.
type moduleFlags struct {
	file   string
	layout string
}

func (f *moduleFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.file, "file", "f", module.ConfigFile, "The module configuration; its paths are relative to its directory.")
	cmd.Flags().StringVar(&f.layout, "layout", "", "The OCI layout directory (default: build/oci next to the module configuration).")
}

func (f *moduleFlags) load() (*module.Config, string, error) {
	dir := filepath.Dir(f.file)
	cfg, err := module.LoadConfig(os.DirFS(dir), filepath.Base(f.file))
	if err != nil {
		return nil, "", err
	}
	layout := f.layout
	if layout == "" {
		layout = filepath.Join(dir, "build", "oci")
	}
	return cfg, layout, nil
}

func newModuleBuildCommand() *cobra.Command {
	var flags moduleFlags
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Render the module's content and pack it into an OCI layout, a layer per part",
		Long: `Build reads module.yaml, renders its kustomization (or packages its Helm chart),
splits CRDs from the rest, checks the default CR, and writes one OCI artifact with a
layer per part (raw manifest, CRDs, chart, default CR) into an OCI image layout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, layout, err := flags.load()
			if err != nil {
				return err
			}
			content, err := module.Build(os.DirFS(filepath.Dir(flags.file)), cfg)
			if err != nil {
				return err
			}
			img, err := module.WriteLayout(layout, content, cfg.Version)
			if err != nil {
				return err
			}
			digest, err := img.Digest()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Built %s %s into %s (%s):\n", cfg.Name, cfg.Version, layout, digest)
			for _, l := range content.Layers() {
				fmt.Fprintf(out, "  %-12s %8d bytes  %s\n", l.Name, len(l.Data), l.MediaType)
			}
			return nil
		},
	}
	flags.register(cmd)
	return cmd
}

func newModulePushCommand() *cobra.Command {
	var (
		flags     moduleFlags
		registry  string
		namespace string
		insecure  bool
		output    string
		signKey   string
	)
	cmd := &cobra.Command{
		Use:   "push --registry HOST[/PATH] [--sign KEYFILE]",
		Short: "Push the built module and print its ModuleTemplate and ModuleReleaseMeta",
		Long: `Push sends the artifact lmctl module build wrote to <registry>/<name>:<version>,
authenticating as docker and crane do (~/.docker/config.json, credential helpers), and
prints a ModuleTemplate whose links are pinned by digest and a ModuleReleaseMeta that puts
the version on module.yaml's channel, ready for kubectl apply in the control plane.
With --sign, the pushed artifact is signed as lmctl module sign does (cosign's
format), for registries the operator requires signatures of (docs/security.md).`,
		Example: `  lmctl module push --registry registry.example.com/modules > publish.yaml
  kubectl apply -f publish.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, layout, err := flags.load()
			if err != nil {
				return err
			}
			img, err := module.ReadLayout(layout)
			if err != nil {
				return err
			}
			opts := []ociartifact.Option{ociartifact.WithKeychain(authn.DefaultKeychain)}
			if insecure {
				opts = append(opts, ociartifact.Insecure())
			}
			// The key is read before the push: a wrong key file pushes
			// nothing unsigned.
			var signer signature.Signer
			if signKey != "" {
				if signer, err = signing.LoadSignerFile(signKey); err != nil {
					return err
				}
			}
			published, err := module.Push(cmd.Context(), img, cfg, registry, namespace, opts...)
			if err != nil {
				return err
			}
			if signer != nil {
				signed, err := signing.Sign(cmd.Context(), published.Artifact.Ref, signer, opts...)
				if err != nil {
					return fmt.Errorf("pushed %s, but signing it failed (sign it with lmctl module sign): %w", published.Artifact.Ref, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "Signed %s (signature %s)\n", signed.Artifact, signed.Signature)
			}
			text, err := module.YAML(published.Template, published.ReleaseMeta)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Pushed %s\n", published.Artifact.Ref)
			if output != "" {
				return os.WriteFile(output, text, 0o644)
			}
			_, err = cmd.OutOrStdout().Write(text)
			return err
		},
	}
	flags.register(cmd)
	f := cmd.Flags()
	f.StringVar(&registry, "registry", "", "Registry and path to push to; the artifact goes to <registry>/<name>:<version>.")
	f.StringVarP(&namespace, "namespace", "n", "kcp-system", "The control plane's namespace of the printed objects.")
	f.BoolVar(&insecure, "insecure", false, "Reach the registry over plain HTTP.")
	f.StringVarP(&output, "output", "o", "", "Write the YAML to this file instead of stdout.")
	f.StringVar(&signKey, "sign", "", "Sign the pushed artifact with this PEM private key file (as lmctl module sign --key).")
	_ = cmd.MarkFlagRequired("registry")
	return cmd
}
