// Package output prints lmctl's results as a table for people or as JSON or
// YAML for scripts, with one set of flags and one set of rules for every
// command.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Format is how a command prints its result.
type Format string

// Formats a command accepts with -o.
const (
	Table Format = "table"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// String, Set and Type make Format a pflag.Value, so that a wrong -o is
// refused while flags are parsed, with the accepted values in the message.
func (f *Format) String() string { return string(*f) }

// Set implements pflag.Value.
func (f *Format) Set(s string) error {
	switch Format(s) {
	case Table, JSON, YAML:
		*f = Format(s)
		return nil
	case "":
		*f = Table
		return nil
	}
	return fmt.Errorf("unknown output format %q: use table, json or yaml", s)
}

// Type implements pflag.Value.
func (f *Format) Type() string { return "table|json|yaml" }

// Structured writes v as JSON (indented, one document) or YAML. It is for
// the non-table formats; the caller renders tables itself.
func Structured(w io.Writer, format Format, v any) error {
	switch format {
	case JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("encoding JSON: %w", err)
		}
		return nil
	case YAML:
		data, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(data)
		return err
	default:
		return fmt.Errorf("format %q is not a structured format", format)
	}
}

// NewTabWriter aligns columns the way kubectl does, so that lmctl's tables
// read like the kubectl output next to them.
func NewTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
}
