package isolation

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
)

// hangingWebhook is an admission webhook that never answers: each request
// is held until the API server gives up on it or the test ends. It counts
// the requests it holds at once, per object name prefix.
type hangingWebhook struct {
	*httptest.Server
	stop chan struct{}

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
	received    int
}

func startHangingWebhook(t *testing.T) *hangingWebhook {
	t.Helper()
	h := &hangingWebhook{stop: make(chan struct{})}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(h.serve))
	h.StartTLS()
	t.Cleanup(func() {
		close(h.stop)
		h.Close()
	})
	return h
}

func (h *hangingWebhook) serve(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil ||
		!strings.HasPrefix(review.Request.Name, "mod-") {
		http.Error(w, "not a module object", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.inFlight++
	h.received++
	h.maxInFlight = max(h.maxInFlight, h.inFlight)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}()
	select {
	case <-r.Context().Done():
	case <-h.stop:
	}
}

func (h *hangingWebhook) counts() (inFlight, maxInFlight, received int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight, h.maxInFlight, h.received
}

// install registers the webhook in a runtime for creates and updates of
// ConfigMaps labelled hangLabel, failing closed after the longest timeout
// the API server allows.
func (h *hangingWebhook) install(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.Certificate().Raw})
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "isolation-hang"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "hang.isolation.lifecycle-manager.test",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(h.URL + "/validate"), CABundle: caPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{hangLabel: "true"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](30),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := c.Create(ctx, config); err != nil {
		t.Fatalf("installing the hanging webhook: %v", err)
	}
	// Removed before the Kymas are (cleanups run last-in first-out), so
	// that the hung runtime's modules can be uninstalled.
	t.Cleanup(func() { _ = client.IgnoreNotFound(c.Delete(ctx, config)) })
}

// timeoutMessage is how a request that ran out of time reads.
var timeoutMessage = regexp.MustCompile(`(?i)timeout|timed out|deadline exceeded`)

// TestHungRuntimeDoesNotStallOtherRuntimes gives one runtime an admission
// webhook that never answers for the modules' objects, and more modules than
// the operator has Manifest workers. Without a per-runtime cap every worker
// would wait on that runtime for the webhook's 30 s, twice over; with it, a
// second runtime's module converges while the first runtime is still stuck,
// and the stuck Manifests end in Error with a timeout instead of hanging.
func TestHungRuntimeDoesNotStallOtherRuntimes(t *testing.T) {
	hook := startHangingWebhook(t)
	hung, healthy := env.runtimes[0], env.runtimes[1]

	modules := make([]string, moduleCount)
	for i := range modules {
		modules[i] = moduleName(i)
	}
	stuck := newKyma(t, "hung", hung.Kubeconfig(), hung.Kubeconfig(), "", modules...)
	hook.install(t, env.clients[0])

	// The hung runtime holds as many workers as it may.
	NewWithT(t).Eventually(func() int {
		inFlight, _, _ := hook.counts()
		return inFlight
	}, timeout, interval).Should(BeNumerically(">=", maxWorkersPerRuntime), "the webhook is not holding the hung runtime's requests")

	other := newKyma(t, "healthy", healthy.Kubeconfig(), healthy.Kubeconfig(), "", moduleName(0))
	// The bound is shorter than the webhook's 30 s: without the cap, no
	// worker would be free before then.
	NewWithT(t).Eventually(func(g Gomega) {
		kyma := other.get(g)
		g.Expect(string(kyma.Status.State)).To(Equal("Ready"), "Kyma %s: %s", other.name, describe(kyma))
	}, 25*time.Second, interval).Should(Succeed(), "a hung runtime stalled another runtime's module")

	stuckKyma := stuck.get(NewWithT(t))
	NewWithT(t).Expect(string(stuckKyma.Status.State)).NotTo(Equal("Ready"), "the hung runtime must still be stuck, or the test proves nothing: %s", describe(stuckKyma))
	_, maxInFlight, received := hook.counts()
	NewWithT(t).Expect(received).To(BeNumerically(">", 0))
	t.Logf("Webhook: %d requests received, at most %d held at once (cap %d per runtime, %d workers)", received, maxInFlight, maxWorkersPerRuntime, manifestWorkers)

	// A Manifest on the hung runtime ends in Error with a timeout, well
	// before the webhook's own 30 s.
	var timedOut string
	NewWithT(t).Eventually(func(g Gomega) {
		var messages []string
		for _, m := range stuck.manifests(g) {
			if m.Status.State != v1beta2.StateError {
				continue
			}
			for _, c := range m.Status.Conditions {
				messages = append(messages, c.Message)
				if timeoutMessage.MatchString(c.Message) {
					timedOut = c.Message
				}
			}
		}
		g.Expect(timedOut).NotTo(BeEmpty(), "no Manifest of the hung runtime is in Error with a timeout; messages: %q", messages)
	}, 25*time.Second, interval).Should(Succeed())
	t.Logf("Hung Manifest: %s", timedOut)
}
