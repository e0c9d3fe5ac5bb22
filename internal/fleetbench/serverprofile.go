package fleetbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// profileServers takes, ServerProfileDelay into the phase, a CPU profile of
// ServerProfileSeconds from the control-plane API server and from the first
// runtime API server at once (their /debug/pprof, which kube-apiserver
// serves to its admin), into ServerProfiles/<phase>-kcp.pprof and
// <phase>-runtime.pprof: what each request of the operator costs there
// (SPEC R14). A phase that finishes first takes none. The returned func
// waits for profiles under way.
func (b *bench) profileServers(ctx context.Context, phase string, finished <-chan struct{}) func() {
	if b.opts.ServerProfiles == "" {
		return func() {}
	}
	seconds := b.opts.ServerProfileSeconds
	if seconds <= 0 {
		seconds = 30
	}
	servers := map[string]*testcluster.ControlPlane{"kcp": b.kcp}
	if len(b.runtimes) > 0 {
		servers["runtime"] = b.runtimes[0]
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-time.After(b.opts.ServerProfileDelay):
		case <-finished:
			return
		case <-ctx.Done():
			return
		}
		var each sync.WaitGroup
		for name, server := range servers {
			path := filepath.Join(b.opts.ServerProfiles, phase+"-"+name+".pprof")
			each.Go(func() {
				if err := serverProfile(ctx, server.Config(), seconds, path); err != nil {
					fmt.Fprintf(b.opts.Progress, "%s: profiling the %s API server: %v\n", phase, name, err)
					return
				}
				fmt.Fprintf(b.opts.Progress, "%s: %ds CPU profile of the %s API server in %s\n", phase, seconds, name, path)
			})
		}
		each.Wait()
	})
	return wg.Wait
}

// serverProfile writes a CPU profile of the API server at cfg to path.
func serverProfile(ctx context.Context, cfg *rest.Config, seconds int, path string) error {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+60)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", cfg.Host, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
