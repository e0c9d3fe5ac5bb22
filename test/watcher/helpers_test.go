package watcher

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/controller/kyma"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/samplemodules"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/agent"
	watcherctrl "github.com/runtime-fleet/lifecycle-manager/internal/watcher/controller"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

const (
	timeout  = 60 * time.Second
	interval = 50 * time.Millisecond
	// runtimeNamespace is where the agent's Secrets and the runtime's Kyma
	// live.
	runtimeNamespace = v1beta2.DefaultRuntimeNamespace
	webhookConfig    = "runtime-watcher-" + runtimeNamespace
)

// watchedKyma is a Kyma of one test whose runtime (the shared one) runs an
// in-process agent reaching the listener through a proxy of its own.
type watchedKyma struct {
	name      string
	runtimeID string
	agent     *agent.Agent
	proxy     *proxy
	stop      context.CancelFunc
	stopped   chan struct{}
}

// newWatchedKyma registers the runtime under a new Kyma with an agent of its
// own, and returns once the runtime's API server calls that agent and the
// agent's heartbeats are accepted. The agent reads its Secrets as its
// ServiceAccount, so that the Role the operator renders is what is tested.
func newWatchedKyma(t testing.TB, name string, options ...func(*agent.Options)) *watchedKyma {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	k := &watchedKyma{name: name, runtimeID: "rt-" + name}

	var err error
	k.proxy, err = newProxy(env.listenerAddr)
	g.Expect(err).NotTo(HaveOccurred())
	cfg := env.runtime.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + runtimeNamespace + ":runtime-watcher"}
	opts := agent.DefaultOptions()
	opts.Config = cfg
	opts.Namespace = runtimeNamespace
	opts.ListenAddress = "127.0.0.1:0"
	opts.MetricsAddress = "0"
	opts.ListenerURL = k.proxy.url()
	opts.KymaName = name
	opts.HeartbeatInterval = heartbeat
	opts.MaxAttempts = 4
	opts.BaseBackoff = 100 * time.Millisecond
	opts.MaxBackoff = 400 * time.Millisecond
	for _, o := range options {
		o(&opts)
	}
	k.agent, err = agent.New(opts)
	g.Expect(err).NotTo(HaveOccurred())
	env.mu.Lock()
	env.agentURLs[name] = k.agent.WebhookURL()
	env.mu.Unlock()

	g.Expect(env.kcpClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{"config": env.runtime.Kubeconfig()},
	})).To(Succeed())
	g.Expect(env.kcpClient.Create(ctx, &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: k.runtimeID}},
		Spec:       v1beta2.KymaSpec{Channel: "regular"},
	})).To(Succeed())
	t.Cleanup(func() { k.release(t) })

	// The agent starts once the operator wrote its Secrets and RBAC.
	g.Eventually(func() error {
		return env.rtClient.Get(ctx, client.ObjectKey{Namespace: runtimeNamespace, Name: agent.DefaultServingSecret}, &corev1.Secret{})
	}, timeout, interval).Should(Succeed())
	agentCtx, cancel := context.WithCancel(ctx)
	k.stop, k.stopped = cancel, make(chan struct{})
	go func() {
		defer close(k.stopped)
		if err := k.agent.Start(agentCtx); err != nil {
			t.Errorf("agent of %s: %v", name, err)
		}
	}()
	g.Eventually(func() float64 {
		return counter(k.agent.Metrics().Heartbeats.WithLabelValues("ok"))
	}, timeout, interval).Should(BeNumerically(">=", 1), "the agent's heartbeats are not accepted")

	// The runtime's API server calls the agent once its webhook informer has
	// the configuration: a watched ConfigMap's update proves it.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + name, Namespace: "default", Labels: map[string]string{watchLabel: watchValue}}}
	g.Expect(env.rtClient.Create(ctx, probe)).To(Succeed())
	t.Cleanup(func() { _ = env.rtClient.Delete(context.Background(), probe) })
	g.Eventually(func(g Gomega) {
		before := k.admissions("UPDATE", agent.ResultReported)
		g.Expect(env.rtClient.Get(ctx, client.ObjectKeyFromObject(probe), probe)).To(Succeed())
		probe.Data = map[string]string{"at": time.Now().String()}
		g.Expect(env.rtClient.Update(ctx, probe)).To(Succeed())
		g.Expect(k.admissions("UPDATE", agent.ResultReported)).To(BeNumerically(">", before))
	}, timeout, 200*time.Millisecond).Should(Succeed(), "the runtime's API server does not call the agent")
	// The probes' reports are delivered, so that none passes for a test's.
	g.Eventually(func() float64 {
		m := k.agent.Metrics()
		return counter(m.ReportsSent) + counter(m.ReportsCoalesced) - counter(m.AdmissionRequests.MustCurryWith(map[string]string{"result": agent.ResultReported}))
	}, timeout, interval).Should(BeZero())
	// The runtime's own Kyma is there to edit.
	g.Eventually(func() error {
		return env.rtClient.Get(ctx, runtimeKymaKey, &v1beta2.Kyma{})
	}, timeout, interval).Should(Succeed())
	k.settle(t)
	return k
}

// settle waits until the Kyma is Ready and no reconcile happened for a
// while, so that what a test observes next was caused by what it did.
func (k *watchedKyma) settle(t testing.TB) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		kyma := &v1beta2.Kyma{}
		g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, kyma)).To(Succeed())
		g.Expect(kyma.Status.State).To(Equal(v1beta2.StateReady))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		before := counter(metrics.KymaReconciles)
		g.Consistently(func() float64 { return counter(metrics.KymaReconciles) }, 700*time.Millisecond, 20*time.Millisecond).Should(Equal(before))
	}, timeout, interval).Should(Succeed(), "the Kyma controller does not come to rest")
}

var runtimeKymaKey = client.ObjectKey{Namespace: runtimeNamespace, Name: v1beta2.DefaultRuntimeKymaName}

// release deletes the Kyma and checks that the agent's resources left the
// runtime and its credentials the control plane.
func (k *watchedKyma) release(t testing.TB) {
	g := NewWithT(t)
	ctx := context.Background()
	kyma := &v1beta2.Kyma{ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: kcpNamespace}}
	g.Expect(client.IgnoreNotFound(env.kcpClient.Delete(ctx, kyma))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma))
	}, timeout, interval).Should(BeTrue(), "Kyma %s was not deleted", k.name)

	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookConfig}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: runtimeNamespace, Name: agent.DefaultClientSecret}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: runtimeNamespace, Name: agent.DefaultServingSecret}},
	} {
		g.Expect(apierrors.IsNotFound(env.rtClient.Get(ctx, client.ObjectKeyFromObject(obj), obj))).To(BeTrue(),
			"%T %s is left in the runtime after its Kyma was deleted", obj, obj.GetName())
	}
	g.Expect(apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: pkiNamespace, Name: watcherctrl.CredentialsSecretName(k.name)}, &corev1.Secret{}))).
		To(BeTrue(), "the runtime's credentials are left in the control plane")
	g.Expect(env.kcpClient.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(kcpNamespace), client.MatchingLabels{v1beta2.KymaNameLabel: k.name})).To(Succeed())
	if k.stop != nil {
		k.stop()
		<-k.stopped
	}
	k.proxy.stop()
	env.mu.Lock()
	delete(env.agentURLs, k.name)
	env.mu.Unlock()
}

// editRuntimeKyma changes the runtime's own Kyma as its owner would.
func editRuntimeKyma(t testing.TB, change func(*v1beta2.Kyma)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		kyma := &v1beta2.Kyma{}
		g.Expect(env.rtClient.Get(context.Background(), runtimeKymaKey, kyma)).To(Succeed())
		change(kyma)
		g.Expect(env.rtClient.Update(context.Background(), kyma)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// installEvolving adds the evolving module to the Kyma in the control plane
// and waits until its Manifest is Ready.
func (k *watchedKyma) installEvolving(g Gomega) {
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		cp := &v1beta2.Kyma{}
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, cp)).To(Succeed())
		addModule(samplemodules.Evolving)(cp)
		g.Expect(env.kcpClient.Update(ctx, cp)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	key := client.ObjectKey{Namespace: kcpNamespace, Name: kyma.ManifestName(k.name, samplemodules.Evolving)}
	g.Eventually(func(g Gomega) {
		manifest := &v1beta2.Manifest{}
		g.Expect(env.kcpClient.Get(ctx, key, manifest)).To(Succeed())
		g.Expect(manifest.Status.State).To(Equal(v1beta2.StateReady))
	}, timeout, interval).Should(Succeed())
}

func addModule(name string) func(*v1beta2.Kyma) {
	return func(k *v1beta2.Kyma) {
		k.Spec.Modules = append(k.Spec.Modules, v1beta2.Module{Name: name, Managed: true, CustomResourcePolicy: v1beta2.CustomResourcePolicyCreateAndDelete})
	}
}

func removeModule(name string) func(*v1beta2.Kyma) {
	return func(k *v1beta2.Kyma) {
		k.Spec.Modules = slices.DeleteFunc(k.Spec.Modules, func(m v1beta2.Module) bool { return m.Name == name })
	}
}

// statusModules lists the modules in the control-plane Kyma's status.
func (k *watchedKyma) statusModules(g Gomega) []string {
	kyma := &v1beta2.Kyma{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, kyma)).To(Succeed())
	names := make([]string, 0, len(kyma.Status.Modules))
	for _, m := range kyma.Status.Modules {
		names = append(names, m.Name)
	}
	return names
}

func (k *watchedKyma) admissions(op, result string) float64 {
	return counter(k.agent.Metrics().AdmissionRequests.WithLabelValues(op, result))
}

func (k *watchedKyma) failures(reason string) float64 {
	return counter(k.agent.Metrics().ReportFailures.WithLabelValues(reason))
}

// credentials returns the runtime's certificates as the control plane keeps
// them.
func (k *watchedKyma) credentials(g Gomega) map[string][]byte {
	secret := &corev1.Secret{}
	g.Expect(env.kcpClient.Get(context.Background(), client.ObjectKey{Namespace: pkiNamespace, Name: watcherctrl.CredentialsSecretName(k.name)}, secret)).To(Succeed())
	return secret.Data
}

// reporter is a client of the listener with the given client certificate,
// configured like the agent's.
func reporter(g Gomega, certPEM, keyPEM, caPEM []byte) *http.Client {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(caPEM)).To(BeTrue())
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, Certificates: []tls.Certificate{cert}},
			MaxIdleConnsPerHost: 16,
		},
	}
}

func (k *watchedKyma) reporter(g Gomega) *http.Client {
	creds := k.credentials(g)
	return reporter(g, creds[pki.ClientCertKey], creds[pki.ClientKeyKey], creds[pki.CAKey])
}

// post sends a report to the listener and returns the status code and message.
func post(c *http.Client, body []byte) (int, string, error) {
	resp, err := c.Post("https://"+env.listenerAddr+report.ReportPath, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(msg)), nil
}

func reportFor(kyma string) []byte {
	body, _ := json.Marshal(report.Report{
		ID: fmt.Sprintf("test-%d", time.Now().UnixNano()), Kyma: kyma, Operation: "UPDATE",
		Object:    report.ObjectRef{Group: v1beta2.GroupVersion.Group, Version: "v1beta2", Kind: "Kyma", Namespace: runtimeNamespace, Name: "default"},
		ChangedAt: time.Now(),
	})
	return body
}

// counter is the value of a counter, or the sum over a counter vector's
// series.
func counter(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	sum := 0.0
	for m := range ch {
		pb := &dto.Metric{}
		if err := m.Write(pb); err == nil {
			sum += pb.GetCounter().GetValue() + pb.GetGauge().GetValue()
		}
	}
	return sum
}
