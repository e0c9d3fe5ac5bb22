package fleetbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
)

// The backup phase (docs/performance.md, "The backup phase"): every Kyma
// is put on one backup schedule, in real time, and one whole round of it
// is measured: how long it takes, how late each backup is against its
// jittered time, and what one backup costs the control plane, the runtimes
// and the registry. The schedule is short (@every 5m by default) rather
// than hourly with a fake clock: the budget plans real backup durations
// against the schedule's period, so only a real clock shows whether the
// operator keeps up, and what a backup costs does not depend on how often
// it is taken.

const (
	phaseBackup        = "backup"
	backupLabel        = "fleet-bench/backup"
	backupScheduleName = "bench"
)

// BackupOptions shape the backup phase.
type BackupOptions struct {
	// Schedule is every Kyma's backup schedule, a cron expression.
	Schedule string
	// MaxConcurrency is the operator's --backup-max-concurrency; zero
	// keeps its default.
	MaxConcurrency int
}

// DefaultBackupOptions back up every 5 minutes.
func DefaultBackupOptions() *BackupOptions { return &BackupOptions{Schedule: "@every 5m"} }

// Backups are the backup phase's figures: one round of the schedule, from
// its first firing after every Kyma was scheduled until each Kyma has a
// backup of it.
type Backups struct {
	Schedule      string  `json:"schedule"`
	PeriodSeconds float64 `json:"periodSeconds"`
	Kymas         int     `json:"kymas"`
	// RoundSeconds is from the round's firing until the last Kyma's backup
	// of the round was stored: the period, when the operator keeps up.
	RoundSeconds float64 `json:"roundSeconds"`
	// Taken counts the backups stored during the round (a few of the next
	// round's may be among them).
	Taken float64 `json:"taken"`
	// LateMaxSeconds and LateP99Seconds are how long after its jittered
	// time each Kyma's backup of the round was taken.
	LateMaxSeconds float64 `json:"lateMaxSeconds"`
	LateP99Seconds float64 `json:"lateP99Seconds"`
	// AverageBackupSeconds is one backup's duration, from the operator's
	// histogram.
	AverageBackupSeconds float64 `json:"averageBackupSeconds"`
	// ParallelLimit is the budget at the end of the round; MaxInFlight the
	// most backups seen running at once (sampled every second).
	ParallelLimit float64 `json:"parallelLimit"`
	MaxInFlight   float64 `json:"maxInFlight"`
	// KCP and Runtimes are the API servers' requests during the round;
	// KCP reads without the benchmark's own (a List per second).
	KCP      Requests `json:"kcp"`
	Runtimes Requests `json:"runtimes"`
	// Registry is what the registry served during the round.
	Registry RegistryTraffic `json:"registry"`
	// OperatorCPUSeconds is this process's CPU during the round.
	OperatorCPUSeconds float64 `json:"operatorCPUSeconds"`
	Converged          bool    `json:"converged"`
}

// RegistryTraffic counts a registry's requests and bytes.
type RegistryTraffic struct {
	Requests int64 `json:"requests"`
	BytesIn  int64 `json:"bytesIn"`
	BytesOut int64 `json:"bytesOut"`
}

func (t RegistryTraffic) sub(before RegistryTraffic) RegistryTraffic {
	return RegistryTraffic{Requests: t.Requests - before.Requests, BytesIn: t.BytesIn - before.BytesIn, BytesOut: t.BytesOut - before.BytesOut}
}

// countingProxy stands between the operator and the registry and counts
// what passes: the in-process registry has no request metrics.
type countingProxy struct {
	server                      *httptest.Server
	requests, bytesIn, bytesOut atomic.Int64
}

func startCountingProxy(registryHost string) *countingProxy {
	p := &countingProxy{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: registryHost})
	p.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if r.Body != nil {
			r.Body = countingBody{ReadCloser: r.Body, n: &p.bytesIn}
		}
		proxy.ServeHTTP(countingWriter{ResponseWriter: w, n: &p.bytesOut}, r)
	}))
	return p
}

func (p *countingProxy) host() string { return p.server.Listener.Addr().String() }

func (p *countingProxy) traffic() RegistryTraffic {
	return RegistryTraffic{Requests: p.requests.Load(), BytesIn: p.bytesIn.Load(), BytesOut: p.bytesOut.Load()}
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// setupBackups starts the counting proxy and parses the schedule that
// selects the labelled Kymas, encrypting to a recipient of a new identity
// (the benchmark never restores, so the identity is not kept).
func (b *bench) setupBackups() error {
	b.registryProxy = startCountingProxy(b.registry.Host())
	_, recipient, err := backup.NewIdentity()
	if err != nil {
		return err
	}
	b.backupSchedules, err = backup.Parse(fmt.Appendf(nil, `schedules:
  - name: %s
    selector: {matchLabels: {%s: "true"}}
    schedule: %q
    repository: %s/backups
    recipients: [%s]
`, backupScheduleName, backupLabel, b.opts.Backup.Schedule, b.registryProxy.host(), recipient))
	return err
}

// configureBackups gives the operator the schedule.
func (b *bench) configureBackups(opts *operator.Options) {
	if b.opts.Backup == nil {
		return
	}
	opts.Backup.Schedules = b.backupSchedules
	opts.Content.InsecureRegistries = append(opts.Content.InsecureRegistries, b.registryProxy.host())
	if b.opts.Backup.MaxConcurrency > 0 {
		opts.Backup.MaxConcurrency = b.opts.Backup.MaxConcurrency
	}
}

// runBackups puts every Kyma on the schedule, waits for the first firing
// after all are scheduled, and measures that round.
func (b *bench) runBackups(ctx context.Context) (*Backups, error) {
	b.setPhase(phaseBackup)
	schedule := &b.backupSchedules.Schedules[0]
	out := &Backups{Schedule: schedule.Schedule, Kymas: b.opts.Kymas}
	fmt.Fprintf(b.opts.Progress, "%s: labelling %d Kymas for schedule %q\n", phaseBackup, b.opts.Kymas, schedule.Schedule)
	if err := labelKymas(ctx, b.client, b.opts.Kymas, b.opts.CreateConcurrency, &b.benchWrites); err != nil {
		return out, err
	}
	var roundStart time.Time
	if err := b.pollBackups(ctx, func(list []v1beta2.RuntimeBackup) bool {
		scheduled := 0
		for i := range list {
			if list[i].Status.NextScheduleTime != nil {
				scheduled++
			}
		}
		return scheduled == b.opts.Kymas
	}); err != nil {
		return out, err
	}
	roundStart = schedule.Next(time.Now())
	out.PeriodSeconds = schedule.Next(roundStart).Sub(roundStart).Seconds()
	fmt.Fprintf(b.opts.Progress, "%s: every Kyma scheduled; the measured round starts at %s\n", phaseBackup, roundStart.Format(time.TimeOnly))
	select {
	case <-ctx.Done():
		return out, context.Cause(ctx)
	case <-time.After(time.Until(roundStart)):
	}

	before, err := b.snapshot(ctx)
	if err != nil {
		return out, err
	}
	registryBefore := b.registryProxy.traffic()
	countBefore, sumBefore := histogramValue(metrics.BackupDuration)
	var last []v1beta2.RuntimeBackup
	polls := 0
	err = b.pollBackups(ctx, func(list []v1beta2.RuntimeBackup) bool {
		polls++
		out.MaxInFlight = max(out.MaxInFlight, gaugeValue(metrics.BackupsInFlight))
		done := 0
		for i := range list {
			// A backup of the round is one taken at or after the Kyma's
			// jittered time in it; one of the round before may still
			// finish after the firing.
			due := schedule.NextFor(list[i].Name, roundStart.Add(-time.Second))
			if t := list[i].Status.LastSuccessfulTime; t != nil && !t.Time.Before(due) {
				done++
			}
		}
		last = list
		return done == b.opts.Kymas
	})
	end := time.Now()
	after, snapErr := b.snapshot(ctx)
	out.RoundSeconds = end.Sub(roundStart).Seconds()
	out.KCP, out.Runtimes = after.kcp.Sub(before.kcp), after.runtimes.Sub(before.runtimes)
	// The benchmark's own Lists of the RuntimeBackups are not the
	// operator's.
	out.KCP.Reads -= float64(polls)
	out.OperatorCPUSeconds = after.cpu - before.cpu
	out.Registry = b.registryProxy.traffic().sub(registryBefore)
	count, sum := histogramValue(metrics.BackupDuration)
	if out.Taken = count - countBefore; out.Taken > 0 {
		out.AverageBackupSeconds = (sum - sumBefore) / out.Taken
	}
	out.ParallelLimit = gaugeValue(metrics.BackupParallelLimit)
	out.LateMaxSeconds, out.LateP99Seconds = lateness(schedule, last, roundStart)
	out.Converged = err == nil && snapErr == nil
	if err == nil {
		err = snapErr
	}
	return out, err
}

// pollBackups lists the RuntimeBackups every second until done says so.
func (b *bench) pollBackups(ctx context.Context, done func([]v1beta2.RuntimeBackup) bool) error {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		list := &v1beta2.RuntimeBackupList{}
		if err := b.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return fmt.Errorf("listing RuntimeBackups: %w", err)
		}
		if done(list.Items) {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ticker.C:
		}
	}
}

// lateness is how long after its jittered time each Kyma's last backup
// was taken: the largest, and the 99th percentile.
func lateness(schedule *backup.Schedule, list []v1beta2.RuntimeBackup, roundStart time.Time) (maxLate, p99 float64) {
	var late []float64
	for i := range list {
		rb := &list[i]
		taken := rb.Status.LastSuccessfulTime
		due := schedule.NextFor(rb.Name, roundStart.Add(-time.Second))
		if taken == nil || taken.Time.Before(due) {
			continue
		}
		// The latest of the Kyma's jittered times not after the backup.
		for next := schedule.NextFor(rb.Name, due); !next.IsZero() && !next.After(taken.Time); next = schedule.NextFor(rb.Name, next) {
			due = next
		}
		late = append(late, taken.Sub(due).Seconds())
	}
	if len(late) == 0 {
		return 0, 0
	}
	slices.Sort(late)
	return late[len(late)-1], late[(len(late)*99)/100]
}

// labelKymas puts the bench's Kymas on the backup schedule.
func labelKymas(ctx context.Context, c client.Client, n, concurrency int, writes *atomic.Int64) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i := range n {
		g.Go(func() error {
			kyma := &v1beta2.Kyma{}
			kyma.SetName(kymaName(i))
			kyma.SetNamespace(namespace)
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, backupLabel)
			if err := c.Patch(ctx, kyma, client.RawPatch("application/merge-patch+json", patch)); err != nil {
				return fmt.Errorf("labelling Kyma %s for backups: %w", kyma.Name, err)
			}
			writes.Add(1)
			return nil
		})
	}
	return g.Wait()
}

// print writes the phase's figures.
func (r *Backups) print(w io.Writer) {
	if r == nil {
		return
	}
	per := func(v float64) float64 {
		if r.Taken == 0 {
			return 0
		}
		return v / r.Taken
	}
	fmt.Fprintf(w, "\nbackup: %d runtimes on %q (period %.0fs): one round took %.1fs; %.0f backups stored in it, each %.3fs on average; late against the jittered time: max %.1fs, p99 %.1fs; budget %.0f at once, at most %.0f seen running\n",
		r.Kymas, r.Schedule, r.PeriodSeconds, r.RoundSeconds, r.Taken, r.AverageBackupSeconds, r.LateMaxSeconds, r.LateP99Seconds, r.ParallelLimit, r.MaxInFlight)
	fmt.Fprintf(w, "backup: per backup: KCP writes %.2f (%s request bytes), KCP reads %.2f; runtime reads %.2f, writes %.2f; registry requests %.1f, %s in, %s out; operator CPU %.1f ms\n",
		per(r.KCP.Writes), bytesIEC(int64(per(r.KCP.WriteBytes))), per(r.KCP.Reads), per(r.Runtimes.Reads), per(r.Runtimes.Writes),
		per(float64(r.Registry.Requests)), bytesIEC(int64(per(float64(r.Registry.BytesIn)))), bytesIEC(int64(per(float64(r.Registry.BytesOut)))),
		1000*per(r.OperatorCPUSeconds))
	// A round writes little besides the RuntimeBackups' status: the top
	// four say it all.
	fmt.Fprintf(w, "backup writes by resource during the round: KCP %s; runtimes %s\n", topResources(r.KCP.WritesByResource, 4), topResources(r.Runtimes.WritesByResource, 4))
}

func gaugeValue(g prometheus.Gauge) float64 {
	m := &dto.Metric{}
	if err := g.Write(m); err != nil {
		return 0
	}
	return m.GetGauge().GetValue()
}

// histogramValue is a histogram's count and sum.
func histogramValue(h prometheus.Histogram) (count, sum float64) {
	m := &dto.Metric{}
	if err := h.Write(m); err != nil {
		return 0, 0
	}
	return float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()
}
