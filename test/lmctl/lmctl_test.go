// Package lmctl_test runs lmctl the way a person or a script does: the built
// binary, in a temporary directory, against the real clusters it starts. It
// checks what they would: that `lmctl dev` brings every module of every
// runtime to Ready, that `lmctl status` and `lmctl modules` report it, that
// Ctrl-C leaves nothing behind, and that a broken module fails the run with
// a message naming it.
package lmctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/catalog"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/dev"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/history"
	lmctlrollout "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/rollout"
	"github.com/runtime-fleet/lifecycle-manager/internal/lmctl/status"
	"github.com/runtime-fleet/lifecycle-manager/internal/operator"
	"github.com/runtime-fleet/lifecycle-manager/internal/requeue"
	"github.com/runtime-fleet/lifecycle-manager/internal/testcluster"
)

// readyTimeout bounds one `lmctl dev` from start to Ready: about 15 s on two
// idle cores, generous for two busy ones.
const readyTimeout = 3 * time.Minute

var (
	// lmctlBin is the binary under test, built once in TestMain.
	lmctlBin string
	// repoRoot is where lmctl dev runs: it finds bin/ and the CRDs there.
	repoRoot string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The test's own client logs nothing worth reading; without a logger
	// controller-runtime warns with a stack trace once the binary is 30 s old.
	ctrllog.SetLogger(logr.Discard())
	var err error
	if repoRoot, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "lmctl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	lmctlBin = filepath.Join(tmp, "lmctl")
	if err := testcluster.GoBuild(repoRoot, "./cmd/lmctl", lmctlBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// lmctl runs the binary to completion and returns its stdout, stderr and
// exit code.
func lmctl(t *testing.T, timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, lmctlBin, args...)
	cmd.Dir = repoRoot
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		t.Fatalf("running lmctl %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("lmctl %s did not finish within %s; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), timeout, out.String(), errOut.String())
	}
	return out.String(), errOut.String(), code
}

// TestDevStatusAndCtrlC is the newcomer's path: lmctl dev until Ready, the
// fleet seen through lmctl status and lmctl modules, the first thing the
// tour suggests (add a module), then Ctrl-C.
func TestDevStatusAndCtrlC(t *testing.T) {
	g := NewWithT(t)
	tmp := t.TempDir()
	stateDir := filepath.Join(tmp, "state")
	readyFile := filepath.Join(tmp, "ready.json")
	logPath := filepath.Join(tmp, "dev.out")
	logFile, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	defer logFile.Close()
	devOutput := func() string {
		data, _ := os.ReadFile(logPath)
		return string(data)
	}

	cmd := exec.Command(lmctlBin, "dev", "--dir", stateDir, "--ready-file", readyFile, "--timeout", readyTimeout.String())
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = logFile, logFile
	g.Expect(cmd.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// Only reached with the process still running when the test failed;
		// its clusters die with it (Pdeathsig).
		_ = cmd.Process.Kill()
		if err := <-exited; err != nil {
			t.Logf("lmctl dev, killed after the test: %v", err)
		}
	})

	var env dev.Environment
	g.Eventually(func(g Gomega) {
		select {
		case err := <-exited:
			exited <- err
			StopTrying(fmt.Sprintf("lmctl dev exited before Ready (%v):\n%s", err, devOutput())).Now()
		default:
		}
		data, err := os.ReadFile(readyFile)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(json.Unmarshal(data, &env)).To(Succeed())
	}, readyTimeout, 200*time.Millisecond).Should(Succeed(), "lmctl dev output:\n%s", devOutput)
	g.Expect(env.KCPKubeconfig).To(Equal(filepath.Join(stateDir, "kcp.kubeconfig")))
	g.Expect(env.Runtimes).To(HaveLen(2))
	g.Expect(devOutput()).To(ContainSubstring("Started a runtime-watcher for runtime-0, runtime-1, reporting changes to the operator's listener at https://127.0.0.1:"))
	// The console it prints shows the fleet.
	g.Expect(devOutput()).To(ContainSubstring("The fleet console: " + env.Console))
	g.Expect(consolePage(g, env.Console)).To(And(ContainSubstring(`data-runtime="runtime-0"`), ContainSubstring(`data-runtime="runtime-1"`)))

	// Every module of every runtime is Ready, as lmctl status tells a script.
	stdout, stderr, code := lmctl(t, time.Minute, "status", "-o", "json", "--kubeconfig", env.KCPKubeconfig)
	g.Expect(code).To(BeZero(), stderr)
	var fleet status.Fleet
	g.Expect(json.Unmarshal([]byte(stdout), &fleet)).To(Succeed(), stdout)
	g.Expect(fleet.Runtimes).To(HaveLen(2))
	for i, rt := range fleet.Runtimes {
		g.Expect(rt.Name).To(Equal(fmt.Sprintf("runtime-%d", i)))
		g.Expect(rt.RuntimeID).To(Equal(env.Runtimes[i].RuntimeID))
		g.Expect(rt.State).To(Equal(v1beta2.StateReady), stdout)
		g.Expect(rt.ModulesReady).To(Equal(rt.ModulesTotal))
		g.Expect(rt.Modules).To(HaveLen(len(dev.DefaultModules)))
		for _, m := range rt.Modules {
			g.Expect(m.State).To(Equal(v1beta2.StateReady), "%s/%s: %s", rt.Name, m.Name, m.Message)
			g.Expect(m.Version).To(Equal("1.0.0"), "%s/%s", rt.Name, m.Name)
		}
	}

	// The table says the same to a person.
	stdout, stderr, code = lmctl(t, time.Minute, "status", "--kubeconfig", env.KCPKubeconfig)
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(MatchRegexp(`(?m)^runtime-0\s+\S+\s+Ready\s+3/3\s`))
	g.Expect(stdout).To(MatchRegexp(`(?m)^runtime-1\s+\S+\s+Ready\s+3/3\s`))

	// The tour names the fleet console too, which shows both runtimes Ready.
	g.Expect(env.Console).To(MatchRegexp(`^http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+$`))
	g.Expect(devOutput()).To(ContainSubstring("console        " + env.Console))
	g.Eventually(func(g Gomega) string { return consolePage(g, env.Console) }, time.Minute, time.Second).Should(And(
		ContainSubstring(`data-runtime="runtime-0" data-state="Ready"`), ContainSubstring(`data-runtime="runtime-1" data-state="Ready"`)))

	// The catalog has every bundled module and evolving's second channel.
	stdout, stderr, code = lmctl(t, time.Minute, "modules", "-o", "json", "--kubeconfig", env.KCPKubeconfig)
	g.Expect(code).To(BeZero(), stderr)
	var cat catalog.Catalog
	g.Expect(json.Unmarshal([]byte(stdout), &cat)).To(Succeed(), stdout)
	names := make([]string, 0, len(cat.Modules))
	for _, m := range cat.Modules {
		names = append(names, m.Name)
		if m.Name == "evolving" {
			g.Expect(m.Channels).To(ContainElement(catalog.Channel{Channel: "fast", Version: "2.0.0", Template: "evolving-2.0.0"}))
		}
	}
	g.Expect(names).To(Equal([]string{"chart", "evolving", "sample", "template-operator"}))

	// What the tour suggests first: add a module to runtime-0's Kyma (the
	// same JSON patch it prints for kubectl) and watch it install.
	g.Expect(devOutput()).To(ContainSubstring(`patch kyma runtime-0 --type=json -p '[{"op":"add","path":"/spec/modules/-","value":{"name":"evolving"}}]'`))
	kcp := kubeClient(t, env.KCPKubeconfig)
	kyma := &v1beta2.Kyma{}
	kyma.Name, kyma.Namespace = "runtime-0", env.Namespace
	g.Expect(kcp.Patch(context.Background(), kyma, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/spec/modules/-","value":{"name":"evolving"}}]`)))).To(Succeed())
	// And what it suggests to a runtime's owner: the same module added in
	// runtime-1's own Kyma, which its runtime-watcher reports at once.
	ownerPatch := `{"spec":{"modules":[{"name":"evolving"}]}}`
	g.Expect(devOutput()).To(ContainSubstring(fmt.Sprintf("kubectl --kubeconfig %s -n kyma-system patch kyma default --type=merge -p '%s'",
		env.Runtimes[1].Kubeconfig, ownerPatch)))
	reportsBefore := acceptedReports(env.OperatorLog, "runtime-1")
	runtimeKyma := &v1beta2.Kyma{}
	runtimeKyma.Name, runtimeKyma.Namespace = v1beta2.DefaultRuntimeKymaName, v1beta2.DefaultRuntimeNamespace
	g.Expect(kubeClient(t, env.Runtimes[1].Kubeconfig).Patch(context.Background(), runtimeKyma,
		client.RawPatch(types.MergePatchType, []byte(ownerPatch)))).To(Succeed())
	// The listener accepted the agent's report of the change: the runtime was
	// heard from, so no fallback reconcile could have brought it over, and
	// the dev fleet's periodic reconcile of a Ready Kyma is the operator's
	// default, far longer than the minute allowed below.
	g.Eventually(func() int { return acceptedReports(env.OperatorLog, "runtime-1") }, 30*time.Second, 200*time.Millisecond).
		Should(BeNumerically(">", reportsBefore), "runtime-1's agent did not report the owner's change; operator log: %s", env.OperatorLog)
	g.Expect(time.Minute).To(BeNumerically("<", requeue.DefaultIntervals().Ready))

	for _, name := range []string{"runtime-0", "runtime-1"} {
		g.Eventually(func(g Gomega) {
			stdout, stderr, code := lmctl(t, time.Minute, "status", "--runtime", name, "-o", "json", "--kubeconfig", env.KCPKubeconfig)
			g.Expect(code).To(BeZero(), stderr)
			var rt status.Runtime
			g.Expect(json.Unmarshal([]byte(stdout), &rt)).To(Succeed())
			g.Expect(rt.Modules).To(ContainElement(status.Module{Name: "evolving", Version: "1.0.0", Channel: "regular", State: v1beta2.StateReady}))
		}, time.Minute, time.Second).Should(Succeed(), name)
	}
	g.Eventually(devOutput, 10*time.Second, 200*time.Millisecond).Should(And(
		MatchRegexp(`runtime-0\s+evolving\s+Ready\s+1\.0\.0`), MatchRegexp(`runtime-1\s+evolving\s+Ready\s+1\.0\.0`)),
		"lmctl dev prints the changes under the tour")

	// A rollout of evolving's regular channel: lmctl shows it, pauses and
	// resumes it, and the two runtimes move to 2.0.0 one after the other.
	rollout := &v1beta2.ModuleRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "evolving-regular", Namespace: env.Namespace},
		Spec: v1beta2.ModuleRolloutSpec{ModuleName: "evolving", Channel: "regular",
			Canary: &v1beta2.RolloutCanary{Count: intstr.FromInt32(1)}, MaxInFlight: intstr.FromInt32(1)},
	}
	g.Expect(kcp.Create(context.Background(), rollout)).To(Succeed())
	rolloutStatus := func(g Gomega) lmctlrollout.Rollout {
		stdout, stderr, code := lmctl(t, time.Minute, "rollout", "status", "evolving-regular", "-o", "json", "--kubeconfig", env.KCPKubeconfig)
		g.Expect(code).To(BeZero(), stderr)
		var r lmctlrollout.Rollout
		g.Expect(json.Unmarshal([]byte(stdout), &r)).To(Succeed(), stdout)
		return r
	}
	g.Eventually(func(g Gomega) {
		r := rolloutStatus(g)
		g.Expect(r.Phase).To(Equal("Completed"))
		g.Expect(r.To).To(Equal("1.0.0"))
		g.Expect(r.Total).To(Equal(int32(2)))
	}, time.Minute, time.Second).Should(Succeed())
	stdout, stderr, code = lmctl(t, time.Minute, "rollout", "pause", "evolving-regular", "--kubeconfig", env.KCPKubeconfig)
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(Equal("ModuleRollout evolving-regular paused\n"))
	g.Expect(kcp.Get(context.Background(), client.ObjectKeyFromObject(rollout), rollout)).To(Succeed())
	g.Expect(rollout.Spec.Paused).To(BeTrue())
	meta := &v1beta2.ModuleReleaseMeta{}
	g.Expect(kcp.Get(context.Background(), client.ObjectKey{Namespace: env.Namespace, Name: "evolving"}, meta)).To(Succeed())
	meta.Spec.Channels = []v1beta2.ChannelVersionAssignment{{Channel: "regular", Version: "2.0.0"}, {Channel: "fast", Version: "2.0.0"}}
	g.Expect(kcp.Update(context.Background(), meta)).To(Succeed())
	g.Eventually(func(g Gomega) {
		r := rolloutStatus(g)
		g.Expect(r.Phase).To(Equal("Paused"))
		g.Expect(r.To).To(Equal("2.0.0"))
		g.Expect(r.Done).To(BeZero())
	}, time.Minute, time.Second).Should(Succeed())
	stdout, stderr, code = lmctl(t, time.Minute, "rollout", "status", "--kubeconfig", env.KCPKubeconfig)
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(MatchRegexp(`(?m)^evolving-regular\s+evolving\s+regular\s+Paused\s+1\.0\.0\s+2\.0\.0\s+-\s+0/2\s`))
	_, stderr, code = lmctl(t, time.Minute, "rollout", "resume", "evolving-regular", "--kubeconfig", env.KCPKubeconfig)
	g.Expect(code).To(BeZero(), stderr)
	g.Eventually(func(g Gomega) {
		r := rolloutStatus(g)
		g.Expect(r.Phase).To(Equal("Completed"))
		g.Expect(r.Done).To(Equal(int32(2)))
		g.Expect(r.Wave).To(Equal(int32(1)), "a canary of one, then the other")
	}, 2*time.Minute, time.Second).Should(Succeed())
	stdout, stderr, code = lmctl(t, time.Minute, "rollout", "status", "evolving-regular", "--kubeconfig", env.KCPKubeconfig)
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(ContainSubstring("Progress:  [" + strings.Repeat("#", 30) + "] 2/2 done"))

	// What happened to evolving in runtime-0, newest first, as a script
	// and a person read it.
	g.Eventually(func(g Gomega) {
		stdout, stderr, code := lmctl(t, time.Minute, "history", "runtime-0", "evolving", "-o", "json", "--kubeconfig", env.KCPKubeconfig)
		g.Expect(code).To(BeZero(), stderr)
		var entries []history.Entry
		g.Expect(json.Unmarshal([]byte(stdout), &entries)).To(Succeed(), stdout)
		g.Expect(entries).To(HaveLen(2), stdout)
		g.Expect(entries[0]).To(And(HaveField("Type", "Upgrade"), HaveField("From", "1.0.0"), HaveField("To", "2.0.0"), HaveField("Result", "Ready")))
		g.Expect(entries[1]).To(And(HaveField("Type", "Install"), HaveField("To", "1.0.0"), HaveField("Result", "Ready")))
	}, time.Minute, time.Second).Should(Succeed())
	// Each runtime is backed up on the dev schedule, into the dev registry.
	for _, name := range []string{"runtime-0", "runtime-1"} {
		g.Eventually(func(g Gomega) {
			rb := &v1beta2.RuntimeBackup{}
			g.Expect(kcp.Get(context.Background(), client.ObjectKey{Namespace: env.Namespace, Name: name}, rb)).To(Succeed())
			g.Expect(rb.Status.Schedule).To(Equal("dev"))
			g.Expect(rb.Status.Repository).To(Equal(env.Registry + "/backups"))
			g.Expect(rb.Status.NextScheduleTime).NotTo(BeNil())
			g.Expect(rb.Status.NextScheduleTime.Time).To(BeTemporally("<=", time.Now().Add(5*time.Minute)))
		}, time.Minute, time.Second).Should(Succeed(), name)
	}
	g.Expect(devOutput()).To(ContainSubstring("backup list runtime-0"))
	// The operator holds the public key only; the identity is a file of the
	// session's, which the tour names for restore.
	g.Expect(env.BackupIdentity).To(BeAnExistingFile())
	g.Expect(devOutput()).To(ContainSubstring("--identity " + env.BackupIdentity))

	stdout, stderr, code = lmctl(t, time.Minute, "history", "runtime-0", "--kubeconfig", env.KCPKubeconfig)
	g.Expect(code).To(BeZero(), stderr)
	g.Expect(stdout).To(MatchRegexp(`(?m)^\S+\s+evolving\s+Upgrade\s+1\.0\.0 → 2\.0\.0\s+\S+\s+Ready$`))
	g.Expect(stdout).To(MatchRegexp(`(?m)^\S+\s+sample\s+Install\s+1\.0\.0\s+\S+\s+Ready$`))

	// Ctrl-C: everything stops, the clusters' directories and the state
	// directory are removed, and no child process is left.
	children := childPIDs(cmd.Process.Pid)
	g.Expect(children).NotTo(BeEmpty())
	clusterDirs, err := filepath.Glob(filepath.Join(stateDir, "clusters", "*"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clusterDirs).To(HaveLen(3))
	for i, link := range clusterDirs {
		clusterDirs[i], err = filepath.EvalSymlinks(link)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	select {
	case err := <-exited:
		exited <- err
		g.Expect(err).NotTo(HaveOccurred(), "exit status after Ctrl-C; output:\n%s", devOutput())
	case <-time.After(time.Minute):
		t.Fatalf("lmctl dev did not exit within a minute of SIGINT; output:\n%s", devOutput())
	}
	for _, pid := range children {
		g.Expect(processExists(pid)).To(BeFalse(), "child process %d survived lmctl dev", pid)
	}
	for _, dir := range append(clusterDirs, stateDir, readyFile) {
		_, err := os.Stat(dir)
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "%s is left behind", dir)
	}
	g.Expect(devOutput()).To(ContainSubstring("Stopped in"))
}

// TestDevExitWhenReady is the scripted use: exit 0 once Ready, nothing left.
func TestDevExitWhenReady(t *testing.T) {
	g := NewWithT(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	stdout, stderr, code := lmctl(t, readyTimeout+time.Minute, "dev", "--exit-when-ready", "--dir", stateDir, "--timeout", readyTimeout.String())
	g.Expect(code).To(BeZero(), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	g.Expect(stdout).To(ContainSubstring("All Ready: 2 runtimes, 6/6 modules"))
	// Not a terminal: one plain line per change, no escape sequences.
	g.Expect(stdout).To(MatchRegexp(`(?m)^\s+\S+s\s+runtime-1\s+sample\s+Ready\s+1\.0\.0$`))
	g.Expect(stdout).NotTo(ContainSubstring("\x1b["))
	_, err := os.Stat(stateDir)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the state directory is removed")
}

// TestDevBrokenModuleFails checks that a module that cannot render fails
// the run early, with a non-zero exit and a message that names the module,
// the runtime and the reason from the Kyma's status. Early is before the
// timeout: the run ends through the error grace, not through the timeout,
// whose message is another. The timeout is the one every run here has to
// come up in, since it also counts the clusters' start.
func TestDevBrokenModuleFails(t *testing.T) {
	g := NewWithT(t)
	stdout, stderr, code := lmctl(t, readyTimeout+time.Minute, "dev", "--exit-when-ready", "--timeout", readyTimeout.String(), "--dir", t.TempDir(),
		"--error-grace", "10s", "--runtimes", "1", "--sample-modules-broken")
	g.Expect(code).To(Equal(1), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	g.Expect(stderr).To(ContainSubstring("stayed in Error for 10s"), "an error that does not move ends the run before the timeout")
	g.Expect(stderr).NotTo(ContainSubstring("Ready within"), "the run did not end at the timeout")
	g.Expect(stderr).To(MatchRegexp(`runtime-0/broken Error: .*the rawManifest part does not render`))
	g.Expect(stderr).NotTo(ContainSubstring("runtime-0/sample"), "the modules that work are not blamed")
}

// TestDevTimeout checks the other failure: not Ready in time, with what is
// still missing.
func TestDevTimeout(t *testing.T) {
	g := NewWithT(t)
	stdout, stderr, code := lmctl(t, 2*time.Minute, "dev", "--exit-when-ready", "--timeout", "1s", "--dir", t.TempDir(), "--runtimes", "1")
	g.Expect(code).To(Equal(1), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	g.Expect(stderr).To(ContainSubstring("not all modules Ready within 1s"))
	g.Expect(stderr).To(MatchRegexp(`runtime-0/sample `))
}

func kubeClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := operator.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// acceptedReports counts the reports about runtime's own Kyma that its
// runtime-watcher got accepted by the listener, as the agent logs them in
// the operator log.
func acceptedReports(operatorLog, runtime string) int {
	data, err := os.ReadFile(operatorLog)
	if err != nil {
		return 0
	}
	n := 0
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, "Report accepted") && strings.Contains(line, `"runtime": "`+runtime+`"`) &&
			strings.Contains(line, `"object": "operator.kyma-project.io/Kyma/kyma-system/default"`) {
			n++
		}
	}
	return n
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			pids = append(pids, child)
		}
	}
	slices.Sort(pids)
	return pids
}

// processExists reports whether pid runs (a zombie counts as gone).
func processExists(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
