// Package listener is the control plane's end of the runtime watcher: an
// HTTPS endpoint that accepts reports from runtime agents over mutual TLS and
// requeues the Kyma a report is for at once (SPEC R9), or, when the changed
// object is a module resource, that module's Manifest.
//
// Trust: a connection is accepted only with a client certificate issued by
// the watcher CA (internal/pki), over TLS 1.3. The certificate's subject
// common name is the runtime id, and a report is accepted only for a Kyma
// whose runtime-id label equals it, so a runtime can never make the control
// plane act on another runtime's Kyma. Reports carry no object content; they
// only make the Kyma controller look again.
//
// Fairness: a runtime's client key is readable inside the runtime, so each
// runtime id has a token bucket of its own (Options.ReportRate); a runtime
// over it is answered 429 with Retry-After, and one runtime flooding the
// listener does not delay another's reports.
package listener

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
)

// Options configure a Listener.
type Options struct {
	// Address is the HTTPS listen address.
	Address string
	// ClientCAs verify the agents' client certificates.
	ClientCAs *x509.CertPool
	// GetCertificate returns the listener's serving certificate.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Kymas finds the Kymas of a runtime id.
	Kymas Lookup
	// Requeue receives the Kymas to reconcile; the Kyma controller reads it
	// through a source.Channel.
	Requeue chan<- event.TypedGenericEvent[*v1beta2.Kyma]
	// Manifests finds the Manifest of a Kyma's module, and ManifestRequeue
	// receives the Manifests to reconcile (the Manifest controller reads it
	// through a source.Channel): a report about a module resource, one that
	// carries the module label, requeues that module's Manifest instead of
	// the Kyma, so that drift in the runtime is corrected and readiness
	// recorded at once. Both nil leaves Manifests to their periodic
	// reconcile.
	Manifests       ManifestLookup
	ManifestRequeue chan<- event.TypedGenericEvent[*v1beta2.Manifest]
	// Health records when each runtime was last heard from; may be nil.
	Health *Health
	// MaxBodyBytes bounds a request body (report.MaxBytes when 0).
	MaxBodyBytes int64
	// EnqueueTimeout bounds the wait for the Kyma and Manifest queues before
	// answering 503 (1s when 0).
	EnqueueTimeout time.Duration
	// RecheckAfter requeues a reported Kyma (and Manifest) once more this
	// long after the report; 0 or less disables it. Admission runs before the
	// runtime's API server stores a change, so the first reconcile may read
	// the object just before it changes; the recheck reads it after. At most
	// one recheck per object is pending, so it costs at most one reconcile
	// per object per period.
	RecheckAfter time.Duration
	// ReportRate and ReportBurst bound the requests (reports and heartbeats)
	// of each runtime id: a token bucket per runtime of ReportBurst tokens,
	// refilled at ReportRate per second. A request without a token is
	// answered 429 with Retry-After before its body is read. ReportRate 0 or
	// less means no limit.
	ReportRate  float64
	ReportBurst int
}

// target is an object the listener requeues: a Kyma or a Manifest.
type target struct {
	manifest bool
	key      types.NamespacedName
}

// Listener accepts runtime reports. It is a manager Runnable.
type Listener struct {
	opts Options
	log  logr.Logger

	limiter *runtimeLimiter

	mu       sync.Mutex
	ctx      context.Context
	rechecks map[target]bool
}

// New returns a Listener; Start serves it.
func New(opts Options) (*Listener, error) {
	if opts.ClientCAs == nil || opts.GetCertificate == nil || opts.Kymas == nil || opts.Requeue == nil {
		return nil, errors.New("listener: client CAs, serving certificate, Kyma lookup and requeue channel are required")
	}
	if (opts.Manifests == nil) != (opts.ManifestRequeue == nil) {
		return nil, errors.New("listener: the Manifest lookup and the Manifest requeue channel go together")
	}
	for _, reason := range reasons {
		metrics.ListenerRejected.WithLabelValues(reason).Add(0)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = report.MaxBytes
	}
	if opts.EnqueueTimeout <= 0 {
		opts.EnqueueTimeout = time.Second
	}
	return &Listener{
		opts: opts, log: ctrl.Log.WithName("listener"), rechecks: map[target]bool{},
		limiter: newRuntimeLimiter(opts.ReportRate, opts.ReportBurst),
	}, nil
}

// NeedLeaderElection keeps the listener on the leader: only there does the
// Kyma controller take from the requeue channel.
func (l *Listener) NeedLeaderElection() bool { return true }

// Start serves until ctx is done.
func (l *Listener) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", l.opts.Address)
	if err != nil {
		return fmt.Errorf("listener: listening on %s: %w", l.opts.Address, err)
	}
	l.mu.Lock()
	l.ctx = ctx
	l.mu.Unlock()
	server := l.server()
	l.log.Info("Listening for runtime reports", "address", ln.Addr().String())
	errs := make(chan error, 1)
	go func() { errs <- server.ServeTLS(ln, "", "") }()
	select {
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
		return nil
	case err := <-errs:
		return fmt.Errorf("listener: %w", err)
	}
}

func (l *Listener) server() *http.Server {
	mux := http.NewServeMux()
	mux.Handle(report.ReportPath, l.instrument(report.ReportPath, l.serveReport))
	mux.Handle(report.HeartbeatPath, l.instrument(report.HeartbeatPath, l.serveHeartbeat))
	return &http.Server{
		Handler: mux,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS13,
			ClientAuth:     tls.RequireAndVerifyClientCert,
			ClientCAs:      l.opts.ClientCAs,
			GetCertificate: l.opts.GetCertificate,
		},
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          log.New(handshakeCounter{l.log}, "", 0),
	}
}

// handlerFunc answers a request and returns the status it answered with.
type handlerFunc func(w http.ResponseWriter, r *http.Request, runtimeID string) int

func (l *Listener) instrument(path string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		metrics.ListenerInFlight.Inc()
		defer metrics.ListenerInFlight.Dec()
		code := l.authenticate(w, r, h)
		metrics.ListenerRequests.WithLabelValues(path, strconv.Itoa(code)).Inc()
		metrics.ListenerLatency.WithLabelValues(path).Observe(time.Since(start).Seconds())
	})
}

// authenticate takes the runtime id from the verified client certificate.
func (l *Listener) authenticate(w http.ResponseWriter, r *http.Request, h handlerFunc) int {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return reply(w, http.StatusMethodNotAllowed, "use POST")
	}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return reply(w, http.StatusUnauthorized, "no verified client certificate")
	}
	leaf := r.TLS.VerifiedChains[0][0]
	if time.Now().After(leaf.NotAfter) {
		metrics.ListenerRejected.WithLabelValues(ReasonCertificateExpired).Inc()
		return reply(w, http.StatusUnauthorized, "client certificate expired")
	}
	runtimeID := leaf.Subject.CommonName
	if runtimeID == "" {
		metrics.ListenerRejected.WithLabelValues(ReasonUnknownRuntime).Inc()
		return reply(w, http.StatusForbidden, "client certificate names no runtime")
	}
	// The limit comes before the body is read and the Kymas are looked up,
	// so that a refused request costs next to nothing.
	if ok, wait := l.limiter.allow(runtimeID, time.Now()); !ok {
		metrics.ListenerRejected.WithLabelValues(ReasonRateLimited).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		return reply(w, http.StatusTooManyRequests, fmt.Sprintf("over %g reports per second; retry later", l.opts.ReportRate))
	}
	return h(w, r, runtimeID)
}

func (l *Listener) serveHeartbeat(w http.ResponseWriter, r *http.Request, runtimeID string) int {
	kymas, err := l.opts.Kymas.KymasOf(r.Context(), runtimeID)
	if err != nil {
		metrics.ListenerRejected.WithLabelValues(ReasonLookup).Inc()
		l.log.Error(err, "Looking up the Kymas of a runtime", "runtimeID", runtimeID)
		return reply(w, http.StatusServiceUnavailable, "lookup failed")
	}
	if len(kymas) == 0 {
		metrics.ListenerRejected.WithLabelValues(ReasonUnknownRuntime).Inc()
		return reply(w, http.StatusForbidden, ReasonUnknownRuntime)
	}
	// A heartbeat requeues nothing, except when it ends a silence (or is
	// the first contact): then the Kymas are requeued once, so that their
	// WatcherReporting condition turns True. Every other heartbeat writes
	// nothing anywhere.
	now := time.Now()
	if l.opts.Health.Seen(runtimeID, now) {
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	}
	targets := make([]target, 0, len(kymas))
	for _, kyma := range kymas {
		targets = append(targets, target{key: kyma})
	}
	if code, ok := l.requeue(w, r, runtimeID, now, targets); !ok {
		return code
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// requeue hands targets to their controllers' queues within EnqueueTimeout.
// When it cannot, it answers 503 (the agent retries), forgets the contact
// recorded at seenAt, so that a transition it carried is not lost, and
// returns false with the status written.
func (l *Listener) requeue(w http.ResponseWriter, r *http.Request, runtimeID string, seenAt time.Time, targets []target) (int, bool) {
	timer := time.NewTimer(l.opts.EnqueueTimeout)
	defer timer.Stop()
	for _, t := range targets {
		if l.send(t, timer.C, r.Context().Done()) {
			continue
		}
		l.opts.Health.forget(runtimeID, seenAt)
		if r.Context().Err() != nil {
			return reply(w, http.StatusServiceUnavailable, "cancelled"), false
		}
		metrics.ListenerRejected.WithLabelValues(ReasonBusy).Inc()
		return reply(w, http.StatusServiceUnavailable, "the queue is busy; retry"), false
	}
	return 0, true
}

func (l *Listener) serveReport(w http.ResponseWriter, r *http.Request, runtimeID string) int {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, l.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			metrics.ListenerRejected.WithLabelValues(ReasonTooLarge).Inc()
			l.log.Info("Refused an oversize report", "runtimeID", runtimeID, "limit", l.opts.MaxBodyBytes)
			return reply(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a report is at most %d bytes", l.opts.MaxBodyBytes))
		}
		metrics.ListenerRejected.WithLabelValues(ReasonMalformed).Inc()
		return reply(w, http.StatusBadRequest, "reading the body failed")
	}
	rep := &report.Report{}
	if err := json.Unmarshal(body, rep); err != nil {
		metrics.ListenerRejected.WithLabelValues(ReasonMalformed).Inc()
		return reply(w, http.StatusBadRequest, "the body is not a report")
	}
	if err := Validate(rep); err != nil {
		metrics.ListenerRejected.WithLabelValues(ReasonMalformed).Inc()
		return reply(w, http.StatusBadRequest, err.Error())
	}

	kymas, err := l.opts.Kymas.KymasOf(r.Context(), runtimeID)
	if err != nil {
		metrics.ListenerRejected.WithLabelValues(ReasonLookup).Inc()
		l.log.Error(err, "Looking up the Kymas of a runtime", "runtimeID", runtimeID)
		return reply(w, http.StatusServiceUnavailable, "lookup failed")
	}
	targets, reason := Authorize(rep, kymas)
	if reason != "" {
		metrics.ListenerRejected.WithLabelValues(reason).Inc()
		l.log.Info("Refused a report", "reason", reason, "runtimeID", runtimeID, "kyma", rep.Kyma, "id", rep.ID)
		return reply(w, http.StatusForbidden, reason)
	}
	requeue := make([]target, 0, len(targets))
	if manifest, ok, err := l.manifestOf(r.Context(), rep, targets); err != nil {
		metrics.ListenerRejected.WithLabelValues(ReasonLookup).Inc()
		l.log.Error(err, "Looking up the Manifest of a module", "runtimeID", runtimeID, "kyma", rep.Kyma, "module", rep.Module)
		return reply(w, http.StatusServiceUnavailable, "lookup failed")
	} else if ok {
		// A module resource concerns its Manifest alone; the Kyma hears of
		// it from the Manifest's status. Requeueing the Kyma as well would
		// spend a Kyma reconcile per report, and one still running when the
		// Manifest turns Ready delays the Kyma's own reaction to it.
		requeue = append(requeue, target{manifest: true, key: manifest})
	}
	now := time.Now()
	// The Kymas are requeued for a report that is not about a module
	// resource, and for any report that ends a silence (their
	// WatcherReporting condition turns True).
	wasHeard := l.opts.Health.Seen(runtimeID, now)
	if len(requeue) == 0 || !wasHeard {
		for _, kyma := range targets {
			requeue = append(requeue, target{key: kyma})
		}
	}
	if code, ok := l.requeue(w, r, runtimeID, now, requeue); !ok {
		return code
	}
	metrics.ListenerReportsAccepted.Inc()
	l.scheduleRechecks(requeue)
	l.log.V(1).Info("Report accepted", "id", rep.ID, "runtimeID", runtimeID, "kyma", rep.Kyma, "module", rep.Module,
		"operation", rep.Operation, "object", rep.Object.Key(), "changedAt", rep.ChangedAt)
	return reply(w, http.StatusAccepted, "")
}

// manifestOf finds the Manifest a report about a module resource concerns:
// only when the report names its Kyma (then the only target) and its module.
func (l *Listener) manifestOf(ctx context.Context, rep *report.Report, targets []types.NamespacedName) (types.NamespacedName, bool, error) {
	if l.opts.Manifests == nil || rep.Module == "" || rep.Kyma == "" || len(targets) != 1 {
		return types.NamespacedName{}, false, nil
	}
	return l.opts.Manifests.ManifestOf(ctx, targets[0], rep.Module)
}

// send hands t to its controller's queue. It gives up, returning false, when
// timeout fires or done is closed; a nil timeout waits for done only.
func (l *Listener) send(t target, timeout <-chan time.Time, done <-chan struct{}) bool {
	if t.manifest {
		ev := event.TypedGenericEvent[*v1beta2.Manifest]{Object: &v1beta2.Manifest{}}
		ev.Object.Namespace, ev.Object.Name = t.key.Namespace, t.key.Name
		select {
		case l.opts.ManifestRequeue <- ev:
			return true
		case <-timeout:
		case <-done:
		}
		return false
	}
	ev := event.TypedGenericEvent[*v1beta2.Kyma]{Object: &v1beta2.Kyma{}}
	ev.Object.Namespace, ev.Object.Name = t.key.Namespace, t.key.Name
	select {
	case l.opts.Requeue <- ev:
		return true
	case <-timeout:
	case <-done:
	}
	return false
}

// scheduleRechecks requeues the targets once more after RecheckAfter,
// unless a recheck of them is pending already.
func (l *Listener) scheduleRechecks(targets []target) {
	if l.opts.RecheckAfter <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range targets {
		if l.rechecks[t] {
			continue
		}
		l.rechecks[t] = true
		time.AfterFunc(l.opts.RecheckAfter, func() {
			l.mu.Lock()
			delete(l.rechecks, t)
			ctx := l.ctx
			l.mu.Unlock()
			if l.send(t, nil, ctx.Done()) {
				metrics.ListenerRechecks.Inc()
			}
		})
	}
}

// Validate checks that a report identifies what changed.
func Validate(rep *report.Report) error {
	switch rep.Operation {
	case "CREATE", "UPDATE", "DELETE":
	default:
		return fmt.Errorf("operation %q is not CREATE, UPDATE or DELETE", rep.Operation)
	}
	if rep.Object.Version == "" || rep.Object.Kind == "" || rep.Object.Name == "" {
		return errors.New("the report does not identify the object (version, kind and name are required)")
	}
	return nil
}

// Authorize decides which of the runtime's Kymas a report requeues: the one
// it names, or all of them when it names none. It refuses a runtime that no
// Kyma carries and a report naming a Kyma the runtime does not own; reason
// is then a Rejected reason.
func Authorize(rep *report.Report, runtimeKymas []types.NamespacedName) (targets []types.NamespacedName, reason string) {
	if len(runtimeKymas) == 0 {
		return nil, ReasonUnknownRuntime
	}
	if rep.Kyma == "" {
		return runtimeKymas, ""
	}
	i := slices.IndexFunc(runtimeKymas, func(k types.NamespacedName) bool { return k.Name == rep.Kyma })
	if i < 0 {
		return nil, ReasonRuntimeMismatch
	}
	return runtimeKymas[i : i+1], ""
}

// retryAfterSeconds is wait in the whole seconds of a Retry-After header,
// at least one.
func retryAfterSeconds(wait time.Duration) int {
	return max(1, int((wait+time.Second-1)/time.Second))
}

func reply(w http.ResponseWriter, code int, msg string) int {
	if msg == "" {
		w.WriteHeader(code)
		return code
	}
	http.Error(w, msg, code)
	return code
}

// handshakeCounter receives net/http's server error log; handshake failures
// (untrusted or missing client certificate, old TLS versions) only show
// there, so it counts them.
type handshakeCounter struct{ log logr.Logger }

func (h handshakeCounter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		metrics.ListenerRejected.WithLabelValues(ReasonTLSHandshake).Inc()
	}
	h.log.V(1).Info(msg)
	return len(p), nil
}
