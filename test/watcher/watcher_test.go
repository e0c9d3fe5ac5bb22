package watcher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/metrics"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/agent"
	watcherctrl "github.com/runtime-fleet/lifecycle-manager/internal/watcher/controller"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/listener/report"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

// A runtime owner edits the runtime's Kyma; the control-plane Kyma shows the
// change in its status within seconds, although nothing but the report can
// make it look again (its periodic reconcile is an hour away).
func TestRuntimeKymaEditReachesControlPlaneAtOnce(t *testing.T) {
	g := NewWithT(t)
	k := newWatchedKyma(t, "edit")
	acceptedBefore := counter(metrics.ListenerReportsAccepted)

	start := time.Now()
	editRuntimeKyma(t, addModule("edited-in-runtime"))
	g.Eventually(k.statusModules, 10*time.Second, 10*time.Millisecond).Should(ContainElement("edited-in-runtime"))
	t.Logf("runtime edit visible in the control plane's status after %s", time.Since(start).Round(time.Millisecond))
	g.Eventually(func() float64 { return counter(metrics.ListenerReportsAccepted) }, 10*time.Second, interval).Should(BeNumerically(">", acceptedBefore))
	g.Expect(k.admissions("UPDATE", agent.ResultReported)).To(BeNumerically(">=", 1))

	// A change of nothing watched (the runtime Kyma's labels) is not
	// reported; the spec is what the default Watcher watches.
	sentBefore := counter(k.agent.Metrics().ReportsSent)
	unchangedBefore := k.admissions("UPDATE", agent.ResultUnchanged)
	editRuntimeKyma(t, func(kyma *v1beta2.Kyma) { kyma.Annotations = map[string]string{"touched": "yes"} })
	g.Eventually(func() float64 { return k.admissions("UPDATE", agent.ResultUnchanged) }, 10*time.Second, interval).Should(BeNumerically(">", unchangedBefore))
	g.Consistently(func() float64 { return counter(k.agent.Metrics().ReportsSent) }, time.Second, interval).Should(Equal(sentBefore))

	// Removing the module is a change too.
	editRuntimeKyma(t, removeModule("edited-in-runtime"))
	g.Eventually(k.statusModules, 10*time.Second, 10*time.Millisecond).ShouldNot(ContainElement("edited-in-runtime"))
}

// The webhook configuration in the runtime follows the Watchers: failure
// policy Ignore, a short timeout, the Watchers' labels as object selector,
// the agent by URL with the CA as bundle, no reports for dry runs.
func TestWebhookConfigurationFollowsWatchers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k := newWatchedKyma(t, "rules")

	hooks := func(g Gomega) map[string]admissionregistrationv1.ValidatingWebhook {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(env.rtClient.Get(ctx, client.ObjectKey{Name: webhookConfig}, cfg)).To(Succeed())
		out := map[string]admissionregistrationv1.ValidatingWebhook{}
		for _, h := range cfg.Webhooks {
			out[h.Name] = h
		}
		return out
	}
	byName := hooks(g)
	kymas := byName[watcherctrl.DefaultWatcherName+"."+kcpNamespace+".watcher.operator.kyma-project.io"]
	g.Expect(kymas.Rules).To(HaveLen(1))
	g.Expect(kymas.Rules[0].Resources).To(Equal([]string{"kymas"}))
	g.Expect(kymas.Rules[0].APIGroups).To(Equal([]string{v1beta2.GroupVersion.Group}))
	g.Expect(kymas.ObjectSelector.MatchLabels).To(Equal(map[string]string{v1beta2.WatchedByLabel: "kyma"}))
	g.Expect(*kymas.FailurePolicy).To(Equal(admissionregistrationv1.Ignore))
	g.Expect(*kymas.SideEffects).To(Equal(admissionregistrationv1.SideEffectClassNoneOnDryRun))
	g.Expect(*kymas.TimeoutSeconds).To(BeNumerically("<=", 5))
	g.Expect(*kymas.ClientConfig.URL).To(Equal(k.agent.WebhookURL() + "/validate/" + watcherctrl.DefaultWatcherName + "/spec"))
	// The runtime's own serving CA, not the watcher CA, vouches for the agent.
	g.Expect(kymas.ClientConfig.CABundle).To(Equal(k.credentials(g)[pki.ServingCACertKey]))
	g.Expect(byName).To(HaveKey(configMapWatcher + "." + kcpNamespace + ".watcher.operator.kyma-project.io"))

	// A new Watcher on a status adds a rule on the status subresource.
	status := &v1beta2.Watcher{
		ObjectMeta: metav1.ObjectMeta{Name: "kyma-status", Namespace: kcpNamespace},
		Spec: v1beta2.WatcherSpec{
			ServiceInfo:     v1beta2.Service{Name: "lifecycle-manager-listener", Namespace: kcpNamespace, Port: 8443},
			LabelsToWatch:   map[string]string{v1beta2.WatchedByLabel: "kyma"},
			ResourceToWatch: v1beta2.WatchableGVR{Group: v1beta2.GroupVersion.Group, Version: "v1beta2", Resource: "kymas"},
			Field:           v1beta2.StatusField,
		},
	}
	g.Expect(env.kcpClient.Create(ctx, status)).To(Succeed())
	g.Eventually(func(g Gomega) {
		h, ok := hooks(g)["kyma-status."+kcpNamespace+".watcher.operator.kyma-project.io"]
		g.Expect(ok).To(BeTrue())
		g.Expect(h.Rules[0].Resources).To(Equal([]string{"kymas/status"}))
		g.Expect(h.Rules[0].Operations).To(Equal([]admissionregistrationv1.OperationType{admissionregistrationv1.Update}))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(status), status)).To(Succeed())
		g.Expect(status.Status.State).To(Equal(v1beta2.StateReady))
	}, timeout, interval).Should(Succeed())

	// A Watcher the runtime's API server could not take is Error and left
	// out, instead of breaking every runtime's webhook configuration.
	invalid := status.DeepCopy()
	invalid.ObjectMeta = metav1.ObjectMeta{Name: "invalid", Namespace: kcpNamespace}
	invalid.Spec.LabelsToWatch = map[string]string{"not a label key": "x"}
	g.Expect(env.kcpClient.Create(ctx, invalid)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(invalid), invalid)).To(Succeed())
		g.Expect(invalid.Status.State).To(Equal(v1beta2.StateError))
		g.Expect(invalid.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("not a label key"))))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(hooks(g)).NotTo(HaveKey(HavePrefix("invalid.")))
	}, time.Second, interval).Should(Succeed())

	// Deleting the Watcher removes its rule.
	g.Expect(env.kcpClient.Delete(ctx, status)).To(Succeed())
	g.Expect(env.kcpClient.Delete(ctx, invalid)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hooks(g)).NotTo(HaveKey(HavePrefix("kyma-status.")))
	}, timeout, interval).Should(Succeed())

	// A dry run is never reported.
	sent := counter(k.agent.Metrics().ReportsSent)
	dryRuns := k.admissions("UPDATE", agent.ResultDryRun)
	kyma := &v1beta2.Kyma{}
	g.Expect(env.rtClient.Get(ctx, runtimeKymaKey, kyma)).To(Succeed())
	addModule("dry-run-only")(kyma)
	g.Expect(env.rtClient.Update(ctx, kyma, client.DryRunAll)).To(Succeed())
	g.Eventually(func() float64 { return k.admissions("UPDATE", agent.ResultDryRun) }, 10*time.Second, interval).Should(BeNumerically(">", dryRuns))
	g.Consistently(func() float64 { return counter(k.agent.Metrics().ReportsSent) }, time.Second, interval).Should(Equal(sent))
}

// In a runtime without a local agent the operator installs the agent as a
// Deployment behind a Service, with least privilege and bounded resources;
// all of it goes with the Kyma.
func TestAgentDeploymentInstalledAndRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name, ns := "deployed", "watcher-deployed"
	g.Expect(env.kcpClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{"config": env.runtime.Kubeconfig()},
	})).To(Succeed())
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: "rt-" + name}},
		// A namespace of its own: this Kyma shares the runtime API server
		// with the other tests' (SPEC R19).
		Spec: v1beta2.KymaSpec{Channel: "regular", SyncNamespace: ns},
	}
	g.Expect(env.kcpClient.Create(ctx, kyma)).To(Succeed())
	defer func() {
		_ = env.kcpClient.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(kcpNamespace), client.MatchingLabels{v1beta2.KymaNameLabel: name})
	}()

	deployment := &appsv1.Deployment{}
	g.Eventually(func() error {
		return env.rtClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "runtime-watcher"}, deployment)
	}, timeout, interval).Should(Succeed())
	c := deployment.Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(ContainElements("--kyma-name="+name, "--namespace="+ns, HavePrefix("--listener-url=https://")))
	g.Expect(c.Resources.Limits.Cpu().MilliValue()).To(BeNumerically("<=", 100))
	g.Expect(c.Resources.Limits.Memory().Value()).To(BeNumerically("<=", 128<<20))
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(deployment.Spec.Template.Spec.ServiceAccountName).To(Equal("runtime-watcher"))
	g.Expect(env.rtClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "runtime-watcher"}, &corev1.Service{})).To(Succeed())

	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Eventually(func() error {
		return env.rtClient.Get(ctx, client.ObjectKey{Name: "runtime-watcher-" + ns}, cfg)
	}, timeout, interval).Should(Succeed())
	for _, h := range cfg.Webhooks {
		g.Expect(h.ClientConfig.URL).To(BeNil())
		g.Expect(h.ClientConfig.Service.Namespace).To(Equal(ns))
		g.Expect(h.ClientConfig.Service.Name).To(Equal("runtime-watcher"))
		// Sharing the API server, it only watches its own namespace.
		g.Expect(h.NamespaceSelector.MatchExpressions).To(ConsistOf(HaveField("Values", []string{ns})))
	}
	// The serving certificate is valid for the Service's name.
	secret := &corev1.Secret{}
	g.Expect(env.rtClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: agent.DefaultServingSecret}, secret)).To(Succeed())
	serving, err := pki.ParseCertificate(secret.Data[corev1.TLSCertKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(serving.VerifyHostname("runtime-watcher." + ns + ".svc")).To(Succeed())

	g.Expect(env.kcpClient.Delete(ctx, kyma)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma))
	}, timeout, interval).Should(BeTrue())
	for _, obj := range []client.Object{
		&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{},
	} {
		g.Expect(apierrors.IsNotFound(env.rtClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "runtime-watcher"}, obj))).To(BeTrue(), "%T is left behind", obj)
	}
	g.Expect(apierrors.IsNotFound(env.rtClient.Get(ctx, client.ObjectKey{Name: "runtime-watcher-" + ns}, cfg))).To(BeTrue())
}

// A client certificate from another CA, even with a valid runtime id, never
// gets past the TLS handshake.
func TestCertificateFromAnotherCAIsRefused(t *testing.T) {
	g := NewWithT(t)
	k := newWatchedKyma(t, "foreign-ca")
	creds := k.credentials(g)

	other, err := pki.NewCA("impostor", time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	forged, err := other.Issue(pki.Request{CommonName: k.runtimeID, Usage: pki.ClientAuth, Validity: time.Hour})
	g.Expect(err).NotTo(HaveOccurred())
	handshakes := counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonTLSHandshake))
	accepted := counter(metrics.ListenerReportsAccepted)

	_, _, err = post(reporter(g, forged.CertPEM, forged.KeyPEM, creds[pki.CAKey]), reportFor(k.name))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(Or(ContainSubstring("certificate"), ContainSubstring("tls")))
	g.Eventually(func() float64 { return counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonTLSHandshake)) }, 5*time.Second, interval).
		Should(BeNumerically(">", handshakes))

	// Without a client certificate, and with TLS 1.2, neither.
	pool := reporter(g, creds[pki.ClientCertKey], creds[pki.ClientKeyKey], creds[pki.CAKey]).Transport.(*http.Transport).TLSClientConfig.RootCAs
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}}}
	_, _, err = post(anonymous, reportFor(k.name))
	g.Expect(err).To(HaveOccurred())
	cert, err := tls.X509KeyPair(creds[pki.ClientCertKey], creds[pki.ClientKeyKey])
	g.Expect(err).NotTo(HaveOccurred())
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MaxVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	_, _, err = post(old, reportFor(k.name))
	g.Expect(err).To(HaveOccurred())
	g.Expect(counter(metrics.ListenerReportsAccepted)).To(Equal(accepted))

	// The genuine certificate works.
	code, msg, err := post(k.reporter(g), reportFor(k.name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusAccepted), msg)
}

// Runtime A's certificate cannot make the control plane act for runtime B:
// neither by a crafted request nor by an object in runtime A that claims to
// belong to B's Kyma.
func TestReportForAnotherRuntimeIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a := newWatchedKyma(t, "runtime-a")
	b := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: "runtime-b", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.RuntimeIDLabel: "rt-runtime-b"}},
		Spec:       v1beta2.KymaSpec{Channel: "regular"},
	}
	g.Expect(env.kcpClient.Create(ctx, b)).To(Succeed())
	defer func() { _ = env.kcpClient.Delete(ctx, b) }()
	// B's certificate exists; it is not A's to use.
	g.Eventually(func() error {
		return env.kcpClient.Get(ctx, client.ObjectKey{Namespace: pkiNamespace, Name: watcherctrl.CredentialsSecretName(b.Name)}, &corev1.Secret{})
	}, timeout, interval).Should(Succeed())

	mismatches := counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonRuntimeMismatch))
	code, msg, err := post(a.reporter(g), reportFor(b.Name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusForbidden))
	g.Expect(msg).To(Equal(listener.ReasonRuntimeMismatch))
	g.Expect(counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonRuntimeMismatch))).To(Equal(mismatches + 1))

	// An object in runtime A labelled with B's Kyma is reported for B by A's
	// agent, and refused.
	rejected := a.failures(agent.ReasonRejected)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "claims-b", Namespace: "default",
		Labels: map[string]string{watchLabel: watchValue, v1beta2.KymaNameLabel: b.Name}}}
	g.Expect(env.rtClient.Create(ctx, cm)).To(Succeed())
	defer func() { _ = env.rtClient.Delete(ctx, cm) }()
	g.Eventually(func() float64 { return a.failures(agent.ReasonRejected) }, 10*time.Second, interval).Should(BeNumerically(">", rejected))
	g.Expect(counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonRuntimeMismatch))).To(BeNumerically(">=", mismatches+2))

	// Once its Kyma is gone, a runtime's certificate is good for nothing.
	unknown := counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonUnknownRuntime))
	creds := &corev1.Secret{}
	g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: pkiNamespace, Name: watcherctrl.CredentialsSecretName(b.Name)}, creds)).To(Succeed())
	bClient := reporter(g, creds.Data[pki.ClientCertKey], creds.Data[pki.ClientKeyKey], creds.Data[pki.CAKey])
	code, _, err = post(bClient, reportFor(b.Name))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusAccepted))
	g.Expect(env.kcpClient.Delete(ctx, b)).To(Succeed())
	g.Eventually(func() int {
		code, _, _ := post(bClient, reportFor(b.Name))
		return code
	}, timeout, interval).Should(Equal(http.StatusForbidden))
	g.Expect(counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonUnknownRuntime))).To(BeNumerically(">", unknown))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: pkiNamespace, Name: watcherctrl.CredentialsSecretName(b.Name)}, &corev1.Secret{}))
	}, timeout, interval).Should(BeTrue(), "B's credentials outlive its Kyma")
}

// A report over 1 MiB is refused before it is parsed; a malformed one too.
func TestOversizeReportIsRefused(t *testing.T) {
	g := NewWithT(t)
	k := newWatchedKyma(t, "oversize")
	c := k.reporter(g)
	tooLarge := counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonTooLarge))

	body := fmt.Appendf(nil, `{"kyma":%q,"operation":"UPDATE","object":{"version":"v1","kind":"ConfigMap","name":"x"},"id":"%s"}`,
		k.name, strings.Repeat("x", report.MaxBytes))
	code, _, err := post(c, body)
	if err == nil {
		g.Expect(code).To(Equal(http.StatusRequestEntityTooLarge))
	} else {
		// The listener may close the connection while the client still sends.
		g.Expect(errors.Is(err, http.ErrBodyNotAllowed) || strings.Contains(err.Error(), "connection")).To(BeTrue(), err.Error())
	}
	g.Eventually(func() float64 { return counter(metrics.ListenerRejected.WithLabelValues(listener.ReasonTooLarge)) }, 5*time.Second, interval).
		Should(Equal(tooLarge + 1))

	code, _, err = post(c, []byte(`{"operation":"PATCH"}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(http.StatusBadRequest))
}

// With the listener out of reach, the agent retries within bounds and then
// drops the report; the runtime goes silent, and the control plane's
// fallback reconcile still brings the change over. When the listener is
// back, reports flow again and the fallback stops.
func TestListenerDownFallsBackToPeriodicReconcile(t *testing.T) {
	g := NewWithT(t)
	k := newWatchedKyma(t, "listener-down")
	g.Eventually(func() float64 { return counter(metrics.WatcherSilentRuntimes) }, timeout, interval).Should(BeZero())

	k.proxy.stop()
	retries := counter(k.agent.Metrics().ReportRetries)
	fallbacks := counter(metrics.WatcherFallbackRequeues)
	editRuntimeKyma(t, addModule("while-listener-down"))
	g.Eventually(func() float64 { return k.failures(agent.ReasonRetriesExhausted) }, timeout, interval).Should(BeNumerically(">=", 1))
	g.Expect(counter(k.agent.Metrics().ReportRetries)-retries).To(BeNumerically(">=", 3), "the agent did not retry")
	g.Expect(k.failures(agent.ReasonUnreachable)).To(BeNumerically(">=", 4))

	g.Eventually(k.statusModules, timeout, interval).Should(ContainElement("while-listener-down"))
	g.Expect(counter(metrics.WatcherFallbackRequeues)).To(BeNumerically(">", fallbacks))
	g.Expect(counter(metrics.WatcherSilentRuntimes)).To(BeNumerically(">=", 1))

	g.Expect(k.proxy.start()).To(Succeed())
	g.Eventually(func() float64 { return counter(metrics.WatcherSilentRuntimes) }, timeout, interval).Should(BeZero())
	sent := counter(k.agent.Metrics().ReportsSent)
	editRuntimeKyma(t, removeModule("while-listener-down"))
	g.Eventually(k.statusModules, 10*time.Second, 10*time.Millisecond).ShouldNot(ContainElement("while-listener-down"))
	g.Expect(counter(k.agent.Metrics().ReportsSent)).To(BeNumerically(">", sent))
}

// Reporting paused for a runtime removes its webhook configuration; changes
// there are then left to the Kyma controller's own schedule, and no
// fallback reconciles a paused runtime.
func TestPausedRuntimeDoesNotReport(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k := newWatchedKyma(t, "paused")
	setPaused := func(paused string) {
		g.Eventually(func(g Gomega) {
			kyma := &v1beta2.Kyma{}
			g.Expect(env.kcpClient.Get(ctx, client.ObjectKey{Namespace: kcpNamespace, Name: k.name}, kyma)).To(Succeed())
			kyma.Labels[v1beta2.WatcherPausedLabel] = paused
			g.Expect(env.kcpClient.Update(ctx, kyma)).To(Succeed())
		}, timeout, interval).Should(Succeed())
	}
	reconciled := counter(metrics.Requeues)
	setPaused("true")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.rtClient.Get(ctx, client.ObjectKey{Name: webhookConfig}, &admissionregistrationv1.ValidatingWebhookConfiguration{}))
	}, timeout, interval).Should(BeTrue())
	// The label change made the Kyma controller reconcile once; the edit
	// below must come after that reconcile finished.
	g.Eventually(func() float64 { return counter(metrics.Requeues) }, timeout, interval).Should(BeNumerically(">", reconciled))

	editRuntimeKyma(t, addModule("while-paused"))
	// Longer than the silence timeout plus a fallback round.
	g.Consistently(k.statusModules, silenceTimeout+3*fallbackInterval, 100*time.Millisecond).ShouldNot(ContainElement("while-paused"))

	// Resuming reconciles the Kyma (a label change) and reinstalls the
	// webhook; the next change is reported again.
	setPaused("false")
	g.Eventually(k.statusModules, timeout, interval).Should(ContainElement("while-paused"))
	g.Eventually(func() error {
		return env.rtClient.Get(ctx, client.ObjectKey{Name: webhookConfig}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		editRuntimeKyma(t, addModule(fmt.Sprintf("after-resume-%d", time.Now().UnixNano())))
		g.Eventually(func() []string { return k.statusModules(g) }, 2*time.Second, 20*time.Millisecond).Should(ContainElement(HavePrefix("after-resume-")))
	}, timeout, interval).Should(Succeed())
}

// The operator's pause group pauses the watcher as it pauses every other
// controller: a Kyma in it gets no certificates and no agent until it
// leaves the group (only the watcher's finalizer, in the control plane, so
// that deleting it while paused still removes what it had).
func TestPauseGroupLeavesRuntimeAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name, ns := "pause-group", "watcher-pause-group"
	g.Expect(env.kcpClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: kcpNamespace, Labels: map[string]string{v1beta2.KymaNameLabel: name}},
		Data:       map[string][]byte{"config": env.runtime.Kubeconfig()},
	})).To(Succeed())
	defer func() {
		_ = env.kcpClient.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(kcpNamespace), client.MatchingLabels{v1beta2.KymaNameLabel: name})
	}()
	kyma := &v1beta2.Kyma{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kcpNamespace, Labels: map[string]string{
			v1beta2.RuntimeIDLabel: "rt-" + name, pausedGroupLabel: "yes",
		}},
		// A namespace of its own, as it shares the runtime API server.
		Spec: v1beta2.KymaSpec{Channel: "regular", SyncNamespace: ns},
	}
	g.Expect(env.kcpClient.Create(ctx, kyma)).To(Succeed())
	credentials := client.ObjectKey{Namespace: pkiNamespace, Name: watcherctrl.CredentialsSecretName(name)}

	// The Kyma controller sees it (and marks it paused) ...
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma)).To(Succeed())
		g.Expect(kyma.Finalizers).To(ContainElement(v1beta2.KymaFinalizer))
	}, timeout, interval).Should(Succeed())
	// ... the watcher does nothing for it: it acts within a second otherwise.
	g.Consistently(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.kcpClient.Get(ctx, credentials, &corev1.Secret{}))).To(BeTrue(), "certificates were issued")
	}, 2*time.Second, interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(env.rtClient.Get(ctx, client.ObjectKey{Name: "runtime-watcher-" + ns}, &admissionregistrationv1.ValidatingWebhookConfiguration{}))).
		To(BeTrue(), "the watcher configured a paused runtime")

	// Leaving the group, the runtime gets its watcher.
	g.Eventually(func(g Gomega) {
		g.Expect(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma)).To(Succeed())
		delete(kyma.Labels, pausedGroupLabel)
		g.Expect(env.kcpClient.Update(ctx, kyma)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() error { return env.kcpClient.Get(ctx, credentials, &corev1.Secret{}) }, timeout, interval).Should(Succeed())
	g.Eventually(func() error {
		return env.rtClient.Get(ctx, client.ObjectKey{Name: "runtime-watcher-" + ns}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	}, timeout, interval).Should(Succeed())

	g.Expect(env.kcpClient.Delete(ctx, kyma)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.kcpClient.Get(ctx, client.ObjectKeyFromObject(kyma), kyma))
	}, timeout, interval).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(env.kcpClient.Get(ctx, credentials, &corev1.Secret{}))).To(BeTrue())
}

// Certificates rotate while reports stream in; not one report is lost: every
// change the runtime's API server passed to the agent was accepted by the
// listener, with the old certificate or the new one.
func TestCertificateRotationLosesNoReport(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	k := newWatchedKyma(t, "rotation")
	serial := func(g Gomega) string {
		secret := &corev1.Secret{}
		g.Expect(env.rtClient.Get(ctx, client.ObjectKey{Namespace: runtimeNamespace, Name: agent.DefaultClientSecret}, secret)).To(Succeed())
		cert, err := pki.ParseCertificate(secret.Data[corev1.TLSCertKey])
		g.Expect(err).NotTo(HaveOccurred())
		return cert.SerialNumber.String()
	}
	first := serial(g)
	reloads := counter(k.agent.Metrics().CertificateReloads.WithLabelValues("client"))
	creates := k.admissions("CREATE", agent.ResultReported)
	sent := counter(k.agent.Metrics().ReportsSent)
	failuresBefore := counter(k.agent.Metrics().ReportFailures)

	// Each object is created once: no two reports coalesce.
	// A steady stream, as runtime owners would make, not a flood.
	pace := time.NewTicker(50 * time.Millisecond)
	defer pace.Stop()
	n := 0
	deadline := time.Now().Add(2 * certValidity)
	for ; serial(g) == first || n < 40; <-pace.C {
		g.Expect(time.Now().Before(deadline)).To(BeTrue(), "the client certificate did not rotate within %s", 2*certValidity)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("rotation-%03d", n), Namespace: "default", Labels: map[string]string{watchLabel: watchValue},
		}}
		g.Expect(env.rtClient.Create(ctx, cm)).To(Succeed())
		n++
	}
	// A few more after the rotation, with the new certificate.
	for range 20 {
		<-pace.C
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("rotation-%03d", n), Namespace: "default", Labels: map[string]string{watchLabel: watchValue},
		}}
		g.Expect(env.rtClient.Create(ctx, cm)).To(Succeed())
		n++
	}
	t.Logf("%d changes across a certificate rotation", n)
	defer func() {
		_ = env.rtClient.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace("default"), client.MatchingLabels{watchLabel: watchValue})
	}()

	g.Expect(k.admissions("CREATE", agent.ResultReported)-creates).To(BeNumerically("==", n), "the runtime's API server did not reach the agent for every change")
	g.Eventually(func() float64 { return counter(k.agent.Metrics().ReportsSent) - sent }, timeout, interval).Should(BeNumerically(">=", n))
	g.Expect(counter(k.agent.Metrics().ReportFailures)).To(Equal(failuresBefore), "reports failed during the rotation")
	g.Expect(counter(k.agent.Metrics().CertificateReloads.WithLabelValues("client"))).To(BeNumerically(">", reloads))
}
