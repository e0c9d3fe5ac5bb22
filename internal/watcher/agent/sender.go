package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"

	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
)

// sender delivers reports to the listener at least once, within bounds: a
// report waits a short window in which later reports of the same object
// replace it (coalescing), is retried with exponential backoff on failures
// that a retry can cure, and is dropped — counted — after the last attempt,
// when it is too large, or when too many objects are waiting.
//
// A 429 (the runtime is over the listener's rate limit) is not a failure of
// the listener: the report waits as long as the answer's Retry-After says,
// keeps taking later reports of its object, and is sent again without using
// up an attempt, so the latest change of every object still arrives.
//
// The window also gives the runtime's API server time to store the change:
// admission runs before the write, so a report sent at once could make the
// control plane read the object before it changed.
type sender struct {
	opts    Options
	creds   *credentials
	metrics *metrics.Agent
	log     logr.Logger
	queue   workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	pending map[string]*report.Report
}

func newSender(opts Options, creds *credentials, m *metrics.Agent, log logr.Logger) *sender {
	return &sender{
		opts: opts, creds: creds, metrics: m, log: log,
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.BaseBackoff, opts.MaxBackoff)),
		pending: map[string]*report.Report{},
	}
}

// enqueue schedules a report; a report of the same object still waiting is
// replaced by it.
func (s *sender) enqueue(rep *report.Report) {
	key := rep.Object.Key()
	s.mu.Lock()
	_, waiting := s.pending[key]
	switch {
	case waiting:
		s.metrics.ReportsCoalesced.Inc()
	case len(s.pending) >= s.opts.MaxPending:
		s.mu.Unlock()
		s.metrics.ReportFailures.WithLabelValues(ReasonQueueFull).Inc()
		s.log.Info("Dropping a report: too many objects waiting", "id", rep.ID, "object", key)
		return
	}
	s.pending[key] = rep
	s.metrics.Pending.Set(float64(len(s.pending)))
	s.mu.Unlock()
	if !waiting {
		s.queue.AddAfter(key, s.opts.CoalesceWindow)
	}
}

// run sends reports until ctx is done.
func (s *sender) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range s.opts.Workers {
		wg.Go(func() {
			for s.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
}

func (s *sender) next(ctx context.Context) bool {
	key, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(key)

	s.mu.Lock()
	rep, ok := s.pending[key]
	delete(s.pending, key)
	s.metrics.Pending.Set(float64(len(s.pending)))
	s.mu.Unlock()
	if !ok {
		s.queue.Forget(key)
		return true
	}

	attempt := s.queue.NumRequeues(key) + 1
	if attempt > 1 {
		s.metrics.ReportRetries.Inc()
	}
	retry, err := s.send(ctx, rep)
	var throttled *throttledError
	switch {
	case err == nil:
		s.queue.Forget(key)
	case errors.As(err, &throttled):
		// Not an attempt: the listener is there and says when to come back.
		// Later reports of the object replace this one meanwhile.
		s.requeue(key, rep)
		s.log.V(1).Info("Report throttled, retrying later", "id", rep.ID, "object", key, "retryAfter", throttled.retryAfter)
		s.queue.AddAfter(key, jitter(throttled.retryAfter))
	case !retry:
		s.queue.Forget(key)
		s.log.Error(err, "Report refused", "id", rep.ID, "object", key)
	case attempt >= s.opts.MaxAttempts:
		s.queue.Forget(key)
		s.metrics.ReportFailures.WithLabelValues(ReasonRetriesExhausted).Inc()
		s.log.Error(err, "Dropping a report after the last attempt; the control plane's periodic reconcile remains",
			"id", rep.ID, "object", key, "attempts", attempt)
	default:
		s.requeue(key, rep)
		s.log.V(1).Info("Report failed, retrying", "id", rep.ID, "object", key, "attempt", attempt, "error", err.Error())
		s.queue.AddRateLimited(key)
	}
	return true
}

// requeue puts rep back to wait for its retry, unless a later report of the
// same object arrived meanwhile.
func (s *sender) requeue(key string, rep *report.Report) {
	s.mu.Lock()
	if _, newer := s.pending[key]; !newer {
		s.pending[key] = rep
		s.metrics.Pending.Set(float64(len(s.pending)))
	}
	s.mu.Unlock()
}

// send posts one report and tells whether a failure is worth retrying.
func (s *sender) send(ctx context.Context, rep *report.Report) (bool, error) {
	body, err := json.Marshal(rep)
	if err != nil {
		return false, fmt.Errorf("encoding report: %w", err)
	}
	if len(body) > s.opts.MaxReportBytes {
		s.metrics.ReportFailures.WithLabelValues(ReasonTooLarge).Inc()
		return false, fmt.Errorf("report of %d bytes is over the limit of %d", len(body), s.opts.MaxReportBytes)
	}
	reason, retry, err := s.post(ctx, report.ReportPath, body)
	if err != nil {
		s.metrics.ReportFailures.WithLabelValues(reason).Inc()
		return retry, err
	}
	s.metrics.ReportsSent.Inc()
	s.metrics.ReportLatency.Observe(time.Since(rep.ChangedAt).Seconds())
	s.log.V(1).Info("Report accepted", "id", rep.ID, "object", rep.Object.Key(), "operation", rep.Operation)
	return false, nil
}

// heartbeat tells the listener the agent is alive.
func (s *sender) heartbeat(ctx context.Context) {
	if _, _, err := s.post(ctx, report.HeartbeatPath, nil); err != nil {
		s.metrics.Heartbeats.WithLabelValues("failed").Inc()
		s.log.V(1).Info("Heartbeat failed", "error", err.Error())
		return
	}
	s.metrics.Heartbeats.WithLabelValues("ok").Inc()
}

var errNoCredentials = errors.New("the client certificate is not loaded yet")

// post sends body to the listener; on failure it says why (a ReportFailures
// reason) and whether a retry may help.
func (s *sender) post(ctx context.Context, path string, body []byte) (reason string, retry bool, err error) {
	client := s.creds.httpClient()
	if client == nil {
		return ReasonNoCredentials, true, errNoCredentials
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(s.opts.ListenerURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return ReasonRejected, false, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return ReasonUnreachable, true, fmt.Errorf("reaching the listener: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	switch {
	case resp.StatusCode < 300:
		return "", false, nil
	case resp.StatusCode == http.StatusTooManyRequests:
		wait := retryAfter(resp.Header.Get("Retry-After"), time.Now(), s.opts.MaxBackoff)
		return ReasonThrottled, true, &throttledError{retryAfter: wait, msg: strings.TrimSpace(string(msg))}
	case resp.StatusCode >= 500:
		return ReasonServerError, true, fmt.Errorf("listener answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	default:
		return ReasonRejected, false, fmt.Errorf("listener refused: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
}

// maxRetryAfter bounds the wait a listener's Retry-After can ask for, in
// case the header is garbage.
const maxRetryAfter = 5 * time.Minute

// throttledError is a 429 from the listener: the runtime is over its rate
// limit and should come back after retryAfter.
type throttledError struct {
	retryAfter time.Duration
	msg        string
}

func (e *throttledError) Error() string {
	return fmt.Sprintf("listener answered 429 (rate limited), retry after %s: %s", e.retryAfter, e.msg)
}

// retryAfter reads a Retry-After header, in seconds or an HTTP date, as a
// wait from now within [0, maxRetryAfter]; without a usable header it is
// fallback.
func retryAfter(header string, now time.Time, fallback time.Duration) time.Duration {
	wait := fallback
	if secs, err := strconv.Atoi(strings.TrimSpace(header)); err == nil {
		wait = time.Duration(min(secs, int(maxRetryAfter/time.Second))) * time.Second // no overflow
	} else if at, err := http.ParseTime(header); err == nil {
		wait = at.Sub(now)
	}
	return min(max(wait, 0), maxRetryAfter)
}

// jitter adds up to a fifth to d, so that the reports refused together do
// not all come back in the same instant.
func jitter(d time.Duration) time.Duration {
	return d + rand.N(d/5+1)
}
