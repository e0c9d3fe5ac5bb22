package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
)

// localCookie carries the local console's token once the URL's token was
// exchanged for it.
const localCookie = "lmctl-console"

// LocalAuthenticator admits the one person who started `lmctl console`: the
// URL it prints carries a random token, exchanged at the first request for
// an HttpOnly, SameSite=Strict cookie. Other local users, and pages of other
// sites in the same browser, cannot read the console; the Host header must
// be the listen address, so a DNS-rebinding page cannot reach it either.
type LocalAuthenticator struct {
	Token string
	// Hosts are the Host headers the console answers to (host:port).
	Hosts []string
	// User names the viewer (the kubeconfig's user, for display).
	User string
}

// NewLocalAuthenticator makes a random token.
func NewLocalAuthenticator(user string, hosts ...string) (*LocalAuthenticator, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return &LocalAuthenticator{Token: hex.EncodeToString(b), Hosts: hosts, User: user}, nil
}

var errLocalToken = errors.New("open the console with the URL lmctl console printed: it carries the token that lets you in")

// Authenticate admits the cookie or the URL's token (the console then sets
// the cookie; see Login).
func (a *LocalAuthenticator) Authenticate(r *http.Request) (Viewer, error) {
	if !a.hostAllowed(r.Host) {
		return Viewer{}, errors.New("the console answers to its own address only")
	}
	token := r.URL.Query().Get("token")
	if c, err := r.Cookie(localCookie); err == nil {
		token = c.Value
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(a.Token)) != 1 {
		return Viewer{}, errLocalToken
	}
	return Viewer{Name: a.User}, nil
}

func (a *LocalAuthenticator) hostAllowed(host string) bool {
	for _, h := range a.Hosts {
		if h == host {
			return true
		}
	}
	return len(a.Hosts) == 0
}

// setCookie turns the URL's token into the cookie, so that the token
// leaves the address bar and the history at the first redirect.
func (a *LocalAuthenticator) setCookie(w http.ResponseWriter, r *http.Request) bool {
	token := r.URL.Query().Get("token")
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(a.Token)) != 1 {
		return false
	}
	http.SetCookie(w, &http.Cookie{Name: localCookie, Value: a.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	u := *r.URL
	q := u.Query()
	q.Del("token")
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
	return true
}

// AllowAll is the Access of `lmctl console`: the informers read with the
// user's own kubeconfig, so the API server has already decided.
type AllowAll struct{}

// CanList allows everything.
func (AllowAll) CanList(context.Context, Viewer, string, string) (bool, error) { return true, nil }

// ListenHosts are the Host headers a listener on addr answers to.
func ListenHosts(addr net.Addr) []string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	hosts := []string{tcp.String()}
	if tcp.IP.IsLoopback() {
		hosts = append(hosts, net.JoinHostPort("localhost", strconv.Itoa(tcp.Port)))
	}
	return hosts
}

// Local is a console served on a local address for the one person who
// started it (lmctl console, lmctl dev).
type Local struct {
	// URL opens the console; it carries the token, so it is printed to
	// its user only.
	URL    string
	server *http.Server
	done   chan error
}

// ServeLocal serves a console of namespace on listen, reading with cfg
// (the user's own kubeconfig, so that the API server decides what they
// see), until ctx ends or Close.
func ServeLocal(ctx context.Context, cfg *rest.Config, namespace, listen string) (*Local, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("console: listening on %s: %w (give another address, e.g. 127.0.0.1:0 for any free port)", listen, err)
	}
	auth, err := NewLocalAuthenticator(cfg.Username, ListenHosts(ln.Addr())...)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	c, err := New(Options{Config: cfg, Namespace: namespace, Authenticator: auth, Access: AllowAll{}})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	l := &Local{
		URL:    "http://" + ln.Addr().String() + "/?token=" + auth.Token,
		server: &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second},
		done:   make(chan error, 2),
	}
	informersCtx, stopInformers := context.WithCancel(ctx)
	go func() { l.done <- c.Start(informersCtx) }()
	go func() {
		err := l.server.Serve(ln)
		stopInformers()
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		l.done <- err
	}()
	context.AfterFunc(ctx, func() { _ = l.server.Close() })
	return l, nil
}

// Done reports why the console stopped: nil once closed, else the error
// of its informers or its listener.
func (l *Local) Done() <-chan error { return l.done }

// Close stops serving and the informers.
func (l *Local) Close() error { return l.server.Close() }
