// Command runtime-watcher is the agent in each runtime: an admission webhook
// that reports changes of watched objects to the control plane's listener
// over mutual TLS (SPEC R9). The control plane installs it and writes its
// certificates into the runtime; docs/watcher.md describes the flags.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runtime-fleet/lifecycle-manager/internal/version"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/agent"
)

func main() {
	opts := agent.DefaultOptions()
	zapOpts := zap.Options{}
	flag.StringVar(&opts.ListenerURL, "listener-url", opts.ListenerURL, "URL of the control plane's listener, https://host:port.")
	flag.StringVar(&opts.KymaName, "kyma-name", opts.KymaName, "Name of this runtime's Kyma in the control plane.")
	flag.StringVar(&opts.Namespace, "namespace", opts.Namespace, "Namespace of the agent's Secrets.")
	flag.StringVar(&opts.ClientSecret, "client-secret", opts.ClientSecret, "Secret with the client certificate (CN = runtime id) and the CA certificate.")
	flag.StringVar(&opts.ServingSecret, "serving-secret", opts.ServingSecret, "Secret with the webhook's serving certificate.")
	flag.StringVar(&opts.ListenAddress, "listen-address", opts.ListenAddress, "HTTPS address of the webhook.")
	flag.StringVar(&opts.MetricsAddress, "metrics-address", opts.MetricsAddress, "HTTP address of /metrics, /healthz and /readyz; 0 disables it.")
	flag.DurationVar(&opts.CoalesceWindow, "coalesce-window", opts.CoalesceWindow, "How long a report waits for later reports of the same object to replace it.")
	flag.IntVar(&opts.Workers, "workers", opts.Workers, "Reports sent in parallel.")
	flag.IntVar(&opts.MaxAttempts, "max-attempts", opts.MaxAttempts, "Attempts per report before it is dropped.")
	flag.DurationVar(&opts.BaseBackoff, "backoff-base", opts.BaseBackoff, "Delay before the second attempt; doubles per attempt.")
	flag.DurationVar(&opts.MaxBackoff, "backoff-max", opts.MaxBackoff, "Longest delay between attempts.")
	flag.IntVar(&opts.MaxPending, "max-pending", opts.MaxPending, "Objects waiting to be reported before new reports are dropped.")
	flag.IntVar(&opts.MaxReportBytes, "max-report-bytes", opts.MaxReportBytes, "Reports larger than this are dropped.")
	flag.DurationVar(&opts.HeartbeatInterval, "heartbeat-interval", opts.HeartbeatInterval, "How often the agent tells the listener it is alive; 0 disables heartbeats.")
	flag.DurationVar(&opts.RequestTimeout, "request-timeout", opts.RequestTimeout, "Timeout of one request to the listener.")
	zapOpts.BindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		version.Print(os.Stdout, "runtime-watcher")
		return
	}

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	opts.Logger = ctrl.Log.WithName("runtime-watcher")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading kubeconfig:", err)
		os.Exit(1)
	}
	opts.Config = cfg
	a, err := agent.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := a.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
