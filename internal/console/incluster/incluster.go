// Package incluster runs the console in the cluster, as the mode
// `lifecycle-manager console` of the operator's binary, in a Deployment of
// its own (lifecycle-manager-console) under a ServiceAccount that may read
// the operator's CRs and review tokens and access, and nothing else: no
// Secret, so no kubeconfig of a runtime, is within its reach
// (docs/architecture.md, "The console"). Viewers authenticate with a bearer
// token (consoleauth.TokenReviewer) and see what their own RBAC lets them
// list (consoleauth.SubjectAccess).
package incluster

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/runtime-fleet/lifecycle-manager/internal/console"
	"github.com/runtime-fleet/lifecycle-manager/internal/console/consoleauth"
	"github.com/runtime-fleet/lifecycle-manager/internal/watcher/pki"
)

// Options configure the in-cluster console.
type Options struct {
	// Namespace holds the Kymas and the rest the console shows.
	Namespace string
	// Address is the HTTPS listen address.
	Address string
	// TLSCertFile and TLSKeyFile are the serving certificate; both empty
	// makes a self-signed one at start for TLSNames (browsers warn; fine
	// behind kubectl port-forward, not for a shared URL).
	TLSCertFile, TLSKeyFile string
	TLSNames                []string
	// AllowAnonymous maps requests without a token to system:anonymous,
	// whose rights SubjectAccessReviews still check. Off by default.
	AllowAnonymous bool
	// Audiences a viewer's token must be meant for; none accepts the API
	// server's.
	Audiences []string
	// AccessTTL is how long an access answer is reused.
	AccessTTL time.Duration
	// Config reaches the API server as the console's ServiceAccount.
	Config *rest.Config
}

// DefaultOptions are the console's defaults.
func DefaultOptions() Options {
	return Options{Namespace: "kcp-system", Address: ":8443", AccessTTL: consoleauth.DefaultAccessTTL}
}

// BindFlags registers the console mode's flags with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	*o = DefaultOptions()
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Control-plane namespace of the Kymas and the module catalog the console shows.")
	fs.StringVar(&o.Address, "address", o.Address, "HTTPS listen address of the console.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM serving certificate; with --tls-key-file. Empty: a self-signed certificate for --tls-names made at start.")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", o.TLSKeyFile, "PEM key of --tls-cert-file.")
	fs.Func("tls-names", "Comma-separated DNS names and IPs of the self-signed certificate (default lifecycle-manager-console.<namespace>.svc,localhost,127.0.0.1).", func(s string) error {
		o.TLSNames = strings.Split(s, ",")
		return nil
	})
	fs.BoolVar(&o.AllowAnonymous, "allow-anonymous", o.AllowAnonymous, "Let requests without a token in as system:anonymous; what it may see is still asked of the API server.")
	fs.Func("token-audiences", "Comma-separated audiences a viewer's token must be meant for (default: the API server's).", func(s string) error {
		o.Audiences = strings.Split(s, ",")
		return nil
	})
	fs.DurationVar(&o.AccessTTL, "access-cache-ttl", o.AccessTTL, "How long an answer of the API server about what a viewer may list is reused; a revoked right shows within it.")
}

// Validate says what to fix in o.
func (o Options) Validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace is required"))
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together: set both or neither"))
	}
	if o.AccessTTL <= 0 {
		errs = append(errs, fmt.Errorf("--access-cache-ttl must be positive, got %s", o.AccessTTL))
	}
	return errors.Join(errs...)
}

// Run serves the console until ctx is done.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}
	auth := consoleauth.NewTokenReviewer(clientset.AuthenticationV1().TokenReviews(), consoleauth.TokenReviewerOptions{
		Audiences: o.Audiences, AllowAnonymous: o.AllowAnonymous,
	})
	access := consoleauth.NewSubjectAccess(clientset.AuthorizationV1().SubjectAccessReviews(), consoleauth.CacheOptions{TTL: o.AccessTTL})
	pages, err := newPages(ctx, o, auth, access)
	if err != nil {
		return err
	}
	cert, err := o.certificate()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.Address, err)
	}
	srv := &http.Server{
		Handler:           Handler(auth, pages),
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctrl.LoggerFrom(ctx).Info("Serving the console", "address", ln.Addr().String(), "namespace", o.Namespace, "anonymous", o.AllowAnonymous)
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return fmt.Errorf("serving the console: %w", err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// Handler routes the login form and the health probe, which need no
// viewer, and everything else to pages, which authenticates each request
// itself (console.Options.Authenticator).
func Handler(auth *consoleauth.TokenReviewer, pages http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/login", &consoleauth.Login{Reviewer: auth})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/", pages)
	return mux
}

// certificate loads the serving certificate, or makes a self-signed one.
func (o Options) certificate() (tls.Certificate, error) {
	if o.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("loading the serving certificate (--tls-cert-file, --tls-key-file): %w", err)
		}
		return cert, nil
	}
	names := o.TLSNames
	if len(names) == 0 {
		names = []string{"lifecycle-manager-console." + o.Namespace + ".svc", "localhost", "127.0.0.1"}
	}
	const validity = 365 * 24 * time.Hour
	ca, err := pki.NewCA("lifecycle-manager-console", validity)
	if err != nil {
		return tls.Certificate{}, err
	}
	req := pki.Request{CommonName: names[0], Usage: pki.ServerAuth, Validity: validity}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			req.IPs = append(req.IPs, ip)
		} else {
			req.DNSNames = append(req.DNSNames, n)
		}
	}
	pair, err := ca.Issue(req)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
}

var (
	_ console.Authenticator = (*consoleauth.TokenReviewer)(nil)
	_ console.Access        = (*consoleauth.SubjectAccess)(nil)
)
