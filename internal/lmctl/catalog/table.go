package catalog

import (
	"fmt"
	"io"
	"strings"

	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
)

// missingTemplate marks a channel that points to a version nobody has
// published.
const missingTemplate = "<missing>"

// WriteTable writes one row per module and channel, then one per published
// version that no channel points to, so that the whole catalog is visible
// in one table.
func WriteTable(w io.Writer, c Catalog) error {
	tw := output.NewTabWriter(w)
	fmt.Fprintln(tw, "MODULE\tCHANNEL\tVERSION\tFLAGS\tTEMPLATE")
	for _, m := range c.Modules {
		assigned := map[string]bool{}
		for _, ch := range m.Channels {
			assigned[ch.Version] = true
			template := ch.Template
			if template == "" {
				template = missingTemplate
			}
			v, _ := m.version(ch.Version)
			mandatory := v.Mandatory || ch.Channel == MandatoryChannel
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, ch.Channel, ch.Version, m.flags(v, mandatory), template)
		}
		for _, v := range m.Versions {
			if assigned[v.Version] {
				continue
			}
			fmt.Fprintf(tw, "%s\t-\t%s\t%s\t%s\n", m.Name, v.Version, m.flags(v, v.Mandatory || m.Mandatory), v.Template)
		}
	}
	return tw.Flush()
}

// version returns the first published template of version.
func (m Module) version(version string) (Version, bool) {
	for _, v := range m.Versions {
		if v.Version == version {
			return v, true
		}
	}
	return Version{}, false
}

// flags names what restricts or widens who gets a version: module-wide
// flags from the ModuleReleaseMeta, per-version ones from the template.
func (m Module) flags(v Version, mandatory bool) string {
	var flags []string
	if mandatory {
		flags = append(flags, "mandatory")
	}
	if m.Beta || v.Beta {
		flags = append(flags, "beta")
	}
	if m.Internal || v.Internal {
		flags = append(flags, "internal")
	}
	if len(flags) == 0 {
		return "-"
	}
	return strings.Join(flags, ",")
}
