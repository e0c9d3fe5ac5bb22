package dev

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/module"
	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	templateoperator "github.com/runtime-fleet/lifecycle-manager/modules/template-operator"
)

// sampleChannels are the channels of the bundled modules in the dev
// catalog: evolving has a second channel, so that switching a Kyma to it
// shows an upgrade (one ConfigMap dropped, one added).
var sampleChannels = map[string]map[string]string{
	samplemodules.Sample:   {"regular": "1.0.0"},
	samplemodules.Chart:    {"regular": "1.0.0"},
	samplemodules.Evolving: {"regular": "1.0.0", "fast": "2.0.0"},
}

// BrokenModule is the module --sample-modules-broken adds to the catalog
// and to every Kyma: its manifest is not valid YAML, so it never renders
// and the run cannot become Ready. It exists to test that lmctl dev fails
// clearly.
const BrokenModule = "broken"

// brokenManifest fails to parse, the way a module team's typo would.
var brokenManifest = []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n")

// publishCatalog pushes the bundled modules to the registry at host and
// creates their ModuleTemplates and ModuleReleaseMetas in namespace.
func publishCatalog(ctx context.Context, c client.Client, host, namespace string, broken bool) error {
	templates, err := samplemodules.Publish(ctx, host, namespace, ociartifact.Insecure())
	if err != nil {
		return fmt.Errorf("pushing the sample modules to %s: %w", host, err)
	}
	metas := make([]client.Object, 0, len(sampleChannels)+1)
	for module, channels := range sampleChannels {
		metas = append(metas, samplemodules.ReleaseMeta(namespace, module, channels))
	}
	tmpl, meta, err := publishTemplateOperator(ctx, host, namespace)
	if err != nil {
		return err
	}
	templates = append(templates, tmpl)
	metas = append(metas, meta)
	if broken {
		content := ociartifact.Module{RawManifest: brokenManifest}
		artifact, err := ociartifact.Push(ctx, fmt.Sprintf("%s/modules/%s:1.0.0", host, BrokenModule), content.Layers(), ociartifact.Insecure())
		if err != nil {
			return fmt.Errorf("pushing module %s: %w", BrokenModule, err)
		}
		templates = append(templates, samplemodules.Version{Module: BrokenModule, Version: "1.0.0"}.Template(namespace, artifact.Links))
		metas = append(metas, samplemodules.ReleaseMeta(namespace, BrokenModule, map[string]string{"regular": "1.0.0"}))
	}
	for _, t := range templates {
		if err := c.Create(ctx, t); err != nil {
			return fmt.Errorf("creating ModuleTemplate %s: %w", t.Name, err)
		}
	}
	for _, m := range metas {
		if err := c.Create(ctx, m); err != nil {
			return fmt.Errorf("creating ModuleReleaseMeta %s: %w", m.GetName(), err)
		}
	}
	return nil
}

// publishTemplateOperator packages the template operator from its module.yaml
// the way `lmctl module build` and `push` do, and returns what push prints:
// its ModuleTemplate and ModuleReleaseMeta.
func publishTemplateOperator(ctx context.Context, host, namespace string) (*v1beta2.ModuleTemplate, *v1beta2.ModuleReleaseMeta, error) {
	cfg, err := module.LoadConfig(templateoperator.Files, module.ConfigFile)
	if err != nil {
		return nil, nil, err
	}
	content, err := module.Build(templateoperator.Files, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building module %s: %w", cfg.Name, err)
	}
	img, err := ociartifact.NewImage(content.Layers())
	if err != nil {
		return nil, nil, err
	}
	published, err := module.Push(ctx, img, cfg, host+"/modules", namespace, ociartifact.Insecure())
	if err != nil {
		return nil, nil, fmt.Errorf("pushing module %s to %s: %w", cfg.Name, host, err)
	}
	return published.Template, published.ReleaseMeta, nil
}
