// Package testkubelet plays the scheduler and the kubelet for the Pods of a
// control plane in tests, so that the real kube-controller-manager judges a
// Deployment the way a cluster does: it binds Pods to a Node of its own, runs
// each Pod's container as a local process of the binary under test (its
// image's), probes the process's real HTTP readiness and liveness endpoints,
// writes the Pod's status as a kubelet does, and on deletion stops the process
// with SIGTERM and removes the Pod once the process is gone.
//
// A Pod has no network of its own here: each named container port becomes a
// free port on 127.0.0.1, and arguments of the form ":PORT" are rewritten to
// it; each Pod gets a made-up IP so that EndpointSlices list it.
package testkubelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// syncInterval is how often the kubelet looks at its Pods: short, since
// every Pod's start and stop waits for it.
const syncInterval = 200 * time.Millisecond

// Options configure a Kubelet.
type Options struct {
	// Client reaches the control plane.
	Client kubernetes.Interface
	// Namespace and Selector choose the Pods this kubelet runs; others are
	// left alone.
	Namespace string
	Selector  labels.Selector
	// NodeName is the Node the Pods are bound to; created when absent.
	NodeName string
	// Binary runs in place of every container's image.
	Binary string
	// ExtraArgs follow the container's arguments (e.g. --kubeconfig, which
	// a Pod gets from its ServiceAccount).
	ExtraArgs []string
	// Dir holds the processes' logs and the Pods' volumes.
	Dir string
	// ReadinessPeriod, when set, replaces the readiness probes' period, so
	// that tests wait less for a Pod to become ready; liveness keeps the
	// Pod's own period, as a slow start must not restart the process.
	ReadinessPeriod time.Duration
	// RestartDelay is how long an exited process waits to be restarted, as
	// a kubelet's crash-loop back-off holds a container; zero restarts at
	// the next sync.
	RestartDelay time.Duration
}

// Kubelet runs the Pods of Options; Start it, Stop it.
type Kubelet struct {
	opts   Options
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	pods   map[types.UID]*pod
	nextIP int
}

// pod is a Pod this kubelet runs.
type pod struct {
	name     string
	ip       string
	ports    map[string]string // container port name (or number) to local address
	cmd      *testcluster.Command
	logPath  string
	restarts int32
	exitedAt time.Time // when the process exited, until it is restarted

	isReady          bool
	readySince       metav1.Time
	livenessFailures int
	nextReadiness    time.Time
	nextLiveness     time.Time

	terminating time.Time
}

// Start creates the Node and runs the kubelet until Stop.
func Start(ctx context.Context, opts Options) (*Kubelet, error) {
	if opts.Client == nil || opts.Binary == "" || opts.Dir == "" || opts.NodeName == "" {
		return nil, errors.New("testkubelet: Client, Binary, Dir and NodeName are required")
	}
	if opts.Selector == nil {
		opts.Selector = labels.Everything()
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: opts.NodeName, Labels: map[string]string{"kubernetes.io/hostname": opts.NodeName}}}
	if _, err := opts.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the Node %s: %w", opts.NodeName, err)
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	k := &Kubelet{opts: opts, cancel: cancel, done: make(chan struct{}), pods: map[types.UID]*pod{}}
	go k.run(loopCtx)
	return k, nil
}

// Stop ends the kubelet and kills its processes, as a node that dies; the
// Pods stay as they are.
func (k *Kubelet) Stop() {
	k.cancel()
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		_ = p.cmd.Kill()
	}
}

// Address is the local address of the named container port of the Pod, or
// "" when the kubelet does not run the Pod.
func (k *Kubelet) Address(podName, port string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		if p.name == podName {
			return p.ports[port]
		}
	}
	return ""
}

// Crash kills the Pod's process as an OOM kill or a panic ends it; the
// kubelet restarts it after RestartDelay, in the same Pod.
func (k *Kubelet) Crash(podName string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		if p.name == podName {
			return p.cmd.Kill()
		}
	}
	return fmt.Errorf("the kubelet runs no Pod %s", podName)
}

// LogTails are the last n lines of each running Pod's process, for a
// failing test to show.
func (k *Kubelet) LogTails(n int) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b strings.Builder
	for _, p := range k.pods {
		fmt.Fprintf(&b, "--- %s (%s):\n%s\n", p.name, p.logPath, p.cmd.LogTail(n))
	}
	return b.String()
}

func (k *Kubelet) run(ctx context.Context) {
	defer close(k.done)
	ticker := time.NewTicker(syncInterval)
	defer ticker.Stop()
	for {
		k.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// sync looks at every Pod once. Errors are retried at the next sync, as a
// kubelet retries: a conflict or a slow API server must not stop it.
func (k *Kubelet) sync(ctx context.Context) {
	pods := k.opts.Client.CoreV1().Pods(k.opts.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: k.opts.Selector.String()})
	if err != nil {
		return
	}
	seen := map[types.UID]bool{}
	for i := range list.Items {
		obj := &list.Items[i]
		seen[obj.UID] = true
		switch {
		case obj.Spec.NodeName == "" && obj.DeletionTimestamp == nil:
			_ = pods.Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: obj.Name, Namespace: obj.Namespace, UID: obj.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: k.opts.NodeName},
			}, metav1.CreateOptions{})
		case obj.Spec.NodeName != k.opts.NodeName:
		case obj.DeletionTimestamp != nil:
			k.terminate(ctx, obj)
		default:
			k.runPod(ctx, obj)
		}
	}
	// A Pod removed without a kubelet's consent (a forced deletion) loses
	// its process at once.
	k.mu.Lock()
	defer k.mu.Unlock()
	for uid, p := range k.pods {
		if !seen[uid] {
			_ = p.cmd.Kill()
			delete(k.pods, uid)
		}
	}
}

// runPod starts the Pod's process when it runs none, restarts it when it
// exited (restartPolicy Always), probes it and writes the Pod's status.
func (k *Kubelet) runPod(ctx context.Context, obj *corev1.Pod) {
	k.mu.Lock()
	p, ok := k.pods[obj.UID]
	k.mu.Unlock()
	if !ok {
		var err error
		if p, err = k.start(obj); err != nil {
			k.writeStatus(ctx, obj, nil, err)
			return
		}
	} else if !p.cmd.Running() {
		if p.exitedAt.IsZero() {
			p.exitedAt = time.Now()
			p.isReady, p.readySince = false, metav1.Now()
		}
		if time.Since(p.exitedAt) < k.opts.RestartDelay {
			k.writeStatus(ctx, obj, p, nil)
			return
		}
		p.restarts++
		p.exitedAt = time.Time{}
		if err := k.restart(obj, p); err != nil {
			k.writeStatus(ctx, obj, p, err)
			return
		}
	}
	k.probe(obj, p)
	k.writeStatus(ctx, obj, p, nil)
}

// start runs the Pod's first container as a process of Binary.
func (k *Kubelet) start(obj *corev1.Pod) (*pod, error) {
	if len(obj.Spec.Containers) == 0 {
		return nil, errors.New("the Pod has no container")
	}
	c := obj.Spec.Containers[0]
	k.mu.Lock()
	k.nextIP++
	ip := fmt.Sprintf("10.244.%d.%d", k.nextIP/250, k.nextIP%250+1)
	k.mu.Unlock()
	p := &pod{name: obj.Name, ip: ip, ports: map[string]string{}, logPath: filepath.Join(k.opts.Dir, obj.Name+".log")}
	for _, port := range c.Ports {
		free, err := testcluster.FreePorts(1)
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(free[0]))
		p.ports[strconv.Itoa(int(port.ContainerPort))] = addr
		if port.Name != "" {
			p.ports[port.Name] = addr
		}
	}
	if err := k.restart(obj, p); err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.pods[obj.UID] = p
	k.mu.Unlock()
	return p, nil
}

// restart starts the Pod's process with its arguments mapped to this
// machine and its environment resolved.
func (k *Kubelet) restart(obj *corev1.Pod, p *pod) error {
	c := obj.Spec.Containers[0]
	args := make([]string, 0, len(c.Args)+len(k.opts.ExtraArgs))
	for _, arg := range c.Args {
		name, value, found := strings.Cut(arg, "=")
		if found {
			value = k.mapValue(obj, c, p, value)
			arg = name + "=" + value
		}
		args = append(args, arg)
	}
	args = append(args, k.opts.ExtraArgs...)
	env, err := resolveEnv(obj, c, p.ip)
	if err != nil {
		return err
	}
	cmd, err := testcluster.StartCommandWithEnv(k.opts.Binary, args, env, p.logPath)
	if err != nil {
		return err
	}
	p.cmd = cmd
	p.nextReadiness, p.nextLiveness = time.Now(), time.Now().Add(probePeriod(c.LivenessProbe, 0))
	p.livenessFailures = 0
	return nil
}

// mapValue rewrites an argument's value: ":PORT" of a container port to
// its local address, a path under a volume mount to the Pod's directory.
func (k *Kubelet) mapValue(obj *corev1.Pod, c corev1.Container, p *pod, value string) string {
	if port, ok := strings.CutPrefix(value, ":"); ok {
		if addr, ok := p.ports[port]; ok {
			return addr
		}
	}
	for _, m := range c.VolumeMounts {
		if value == m.MountPath || strings.HasPrefix(value, m.MountPath+"/") {
			dir := filepath.Join(k.opts.Dir, obj.Name, m.Name)
			_ = os.MkdirAll(dir, 0o755)
			return dir + strings.TrimPrefix(value, m.MountPath)
		}
	}
	return value
}

// resolveEnv is the container's environment: literal values and the
// downward API's fields a kubelet fills in.
func resolveEnv(obj *corev1.Pod, c corev1.Container, ip string) ([]string, error) {
	var env []string
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, fmt.Errorf("env %s: the test kubelet resolves only fieldRef", e.Name)
			}
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				value = obj.Name
			case "metadata.namespace":
				value = obj.Namespace
			case "spec.nodeName":
				value = obj.Spec.NodeName
			case "status.podIP":
				value = ip
			default:
				return nil, fmt.Errorf("env %s: the test kubelet does not resolve the field %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return env, nil
}

// probe runs the readiness and liveness probes that are due. A liveness
// probe that fails its threshold restarts the process, as a kubelet does.
func (k *Kubelet) probe(obj *corev1.Pod, p *pod) {
	c := obj.Spec.Containers[0]
	now := time.Now()
	if !now.Before(p.nextReadiness) {
		p.nextReadiness = now.Add(probePeriod(c.ReadinessProbe, k.opts.ReadinessPeriod))
		ready := c.ReadinessProbe == nil || probeHTTP(c.ReadinessProbe, p.ports) == nil
		if ready != p.isReady {
			p.isReady, p.readySince = ready, metav1.Now()
		}
	}
	if c.LivenessProbe != nil && !now.Before(p.nextLiveness) {
		p.nextLiveness = now.Add(probePeriod(c.LivenessProbe, 0))
		if probeHTTP(c.LivenessProbe, p.ports) != nil {
			p.livenessFailures++
		} else {
			p.livenessFailures = 0
		}
		if p.livenessFailures >= int(max(c.LivenessProbe.FailureThreshold, 3)) {
			_ = p.cmd.Kill() // restarted at the next sync
		}
	}
}

func probePeriod(probe *corev1.Probe, override time.Duration) time.Duration {
	switch {
	case override > 0:
		return override
	case probe == nil || probe.PeriodSeconds == 0:
		return 10 * time.Second
	default:
		return time.Duration(probe.PeriodSeconds) * time.Second
	}
}

// probeHTTP runs an httpGet probe against the Pod's local port: 2xx and
// 3xx pass, as for a kubelet.
func probeHTTP(probe *corev1.Probe, ports map[string]string) error {
	get := probe.HTTPGet
	if get == nil {
		return errors.New("the test kubelet runs httpGet probes only")
	}
	addr, ok := ports[get.Port.String()]
	if !ok {
		return fmt.Errorf("no container port %s", get.Port.String())
	}
	timeout := time.Duration(max(probe.TimeoutSeconds, 1)) * time.Second
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get("http://" + addr + get.Path)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("%s: %s", get.Path, resp.Status)
	}
	return nil
}

// writeStatus writes the Pod's status when it changed: Running with its IP,
// and Ready as the readiness probe says.
func (k *Kubelet) writeStatus(ctx context.Context, obj *corev1.Pod, p *pod, startErr error) {
	status := obj.Status.DeepCopy()
	c := obj.Spec.Containers[0]
	cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image}
	ready := corev1.ConditionFalse
	since := metav1.Now()
	if startErr != nil {
		status.Phase = corev1.PodPending
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: startErr.Error()}
	} else {
		status.Phase = corev1.PodRunning
		status.PodIP, status.PodIPs = p.ip, []corev1.PodIP{{IP: p.ip}}
		status.HostIP, status.HostIPs = "10.243.0.1", []corev1.HostIP{{IP: "10.243.0.1"}}
		if status.StartTime == nil {
			status.StartTime = ptr.To(metav1.Now())
		}
		if p.exitedAt.IsZero() {
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: *status.StartTime}
		} else {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		}
		cs.RestartCount, cs.Started, cs.Ready = p.restarts, ptr.To(true), p.isReady
		since = p.readySince
		if p.isReady {
			ready = corev1.ConditionTrue
		}
	}
	status.ContainerStatuses = []corev1.ContainerStatus{cs}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized} {
		setCondition(status, t, corev1.ConditionTrue, obj.CreationTimestamp)
	}
	for _, t := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		setCondition(status, t, ready, since)
	}
	if statusEqual(&obj.Status, status) {
		return
	}
	updated := obj.DeepCopy()
	updated.Status = *status
	_, _ = k.opts.Client.CoreV1().Pods(obj.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
}

// setCondition sets a condition, keeping its transition time while its
// status stays.
func setCondition(status *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, since metav1.Time) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			if status.Conditions[i].Status != s {
				status.Conditions[i].Status, status.Conditions[i].LastTransitionTime = s, since
			}
			return
		}
	}
	status.Conditions = append(status.Conditions, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: since})
}

// statusEqual compares what writeStatus sets.
func statusEqual(a, b *corev1.PodStatus) bool {
	if a.Phase != b.Phase || a.PodIP != b.PodIP || len(a.ContainerStatuses) != len(b.ContainerStatuses) {
		return false
	}
	for i := range a.ContainerStatuses {
		x, y := a.ContainerStatuses[i], b.ContainerStatuses[i]
		if x.Ready != y.Ready || x.RestartCount != y.RestartCount || (x.State.Waiting == nil) != (y.State.Waiting == nil) {
			return false
		}
	}
	return slices.EqualFunc(a.Conditions, b.Conditions, func(x, y corev1.PodCondition) bool {
		return x.Type == y.Type && x.Status == y.Status
	})
}

// terminate stops a deleted Pod's process with SIGTERM, with SIGKILL when
// its grace period ends, and removes the Pod once the process is gone.
func (k *Kubelet) terminate(ctx context.Context, obj *corev1.Pod) {
	k.mu.Lock()
	p, ok := k.pods[obj.UID]
	k.mu.Unlock()
	if ok && p.cmd.Running() {
		grace := time.Duration(ptr.Deref(obj.DeletionGracePeriodSeconds, 30)) * time.Second
		switch {
		case p.terminating.IsZero():
			p.terminating = time.Now()
			_ = p.cmd.Terminate()
		case time.Since(p.terminating) > grace:
			_ = p.cmd.Kill()
		}
		return
	}
	err := k.opts.Client.CoreV1().Pods(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &obj.UID},
	})
	if err == nil || apierrors.IsNotFound(err) {
		k.mu.Lock()
		delete(k.pods, obj.UID)
		k.mu.Unlock()
	}
}

// PodReady reports the Pod's Ready condition, which the kubelet writes and
// the ReplicaSet and EndpointSlice controllers read.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
