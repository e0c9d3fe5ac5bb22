package lmctl

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/output"
)

// settle is how long `-w` waits after a change for the next before it
// redraws: a reconcile writes a Kyma and its Manifests within a few
// milliseconds, and one redraw for all of them is easier to read.
const settle = 100 * time.Millisecond

// live is a namespace's objects of some kinds, kept in memory by one list
// and then a watch per kind (an informer), so that `-w` costs the control
// plane a watch per user and not a list of the fleet every second: at 5,000
// Kymas a list a second per watching SRE is a load of its own.
type live struct {
	reader client.Reader
	// synced is closed once every kind was listed.
	synced <-chan struct{}
	// changed receives when an object was added, changed or deleted;
	// failed when a list or watch failed (the informer retries by itself).
	changed <-chan struct{}
	failed  <-chan error
}

// startLive starts the informers of kinds in namespace; they stop with ctx.
// It returns at once; synced says when the first lists arrived.
func startLive(ctx context.Context, cfg *rest.Config, scheme *k8sruntime.Scheme, namespace string, kinds ...client.Object) (live, error) {
	failed := make(chan error, 1)
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		DefaultWatchErrorHandler: func(_ context.Context, _ *toolscache.Reflector, err error) {
			select {
			case failed <- err:
			default: // one unread failure is enough to show
			}
		},
	})
	if err != nil {
		return live{}, fmt.Errorf("watching %s: %w", cfg.Host, err)
	}
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default: // a redraw is already due
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, kind := range kinds {
		informer, err := c.GetInformer(ctx, kind, cache.BlockUntilSynced(false))
		if err != nil {
			return live{}, fmt.Errorf("watching %T: %w", kind, err)
		}
		if _, err := informer.AddEventHandler(handler); err != nil {
			return live{}, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	synced := make(chan struct{})
	go func() {
		if c.WaitForCacheSync(ctx) {
			close(synced)
		}
	}()
	return live{reader: c, synced: synced, changed: changed, failed: failed}, nil
}

// watchAndPrint prints what get reads from src, then again each time a
// watched object changes and what get returns with it, until ctx ends. On a
// terminal each table replaces the last, like watch(1); JSON and YAML are
// printed one after another.
func watchAndPrint[T any](ctx context.Context, w io.Writer, format output.Format, src live, get func(context.Context, client.Reader) (T, error), print func(io.Writer, T) error) error {
	tty, _ := stdoutTerminal()
	table := format == output.Table
	var last *T
	for synced := false; !synced; {
		select {
		case <-ctx.Done():
			return nil
		case err := <-src.failed:
			// Not listed yet: a control plane away, or no right to list.
			// The informer tries again; say why it waits.
			fmt.Fprintf(w, "%s  %v\n", time.Now().Format(time.TimeOnly), err)
		case <-src.synced:
			synced = true
		}
	}
	for {
		v, err := get(ctx, src.reader)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			fmt.Fprintf(w, "%s  %v\n", time.Now().Format(time.TimeOnly), err)
		case last == nil || !reflect.DeepEqual(*last, v):
			last = &v
			if tty && table {
				fmt.Fprint(w, "\x1b[H\x1b[2J")
			}
			if table {
				fmt.Fprintf(w, "%s  watching, Ctrl-C to stop\n", time.Now().Format(time.TimeOnly))
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
		case err := <-src.failed:
			// A control plane that is briefly away is part of what one
			// watches; say so, and the informer lists and watches again.
			fmt.Fprintf(w, "%s  %v\n", time.Now().Format(time.TimeOnly), err)
			continue
		case <-src.changed:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(settle):
		}
	}
}
