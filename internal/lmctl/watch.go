package lmctl

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
)

// watchInterval is how often `-w` looks again. Polling one list a second is
// cheap for a control plane and simpler than a watch that must survive
// reconnects.
const watchInterval = time.Second

// watchAndPrint prints what get returns, then again each time it changes,
// until ctx ends. On a terminal each table replaces the last, like
// watch(1); JSON and YAML are printed one after another.
func watchAndPrint[T any](ctx context.Context, w io.Writer, format output.Format, get func(context.Context) (T, error), print func(io.Writer, T) error) error {
	tty, _ := stdoutTerminal()
	table := format == output.Table
	var last *T
	ticker := time.NewTicker(watchInterval)
	defer ticker.Stop()
	for {
		v, err := get(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			// A control plane that is briefly away is part of what one
			// watches; say so and keep going.
			fmt.Fprintf(w, "%s  %v\n", time.Now().Format(time.TimeOnly), err)
		case last == nil || !reflect.DeepEqual(*last, v):
			last = &v
			if tty && table {
				fmt.Fprint(w, "\x1b[H\x1b[2J")
			}
			if table {
				fmt.Fprintf(w, "%s  every %s, Ctrl-C to stop\n", time.Now().Format(time.TimeOnly), watchInterval)
			}
			if err := print(w, v); err != nil {
				return err
			}
			if !tty && table {
				fmt.Fprintln(w)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}
