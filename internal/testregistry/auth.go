package testregistry

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Option configures a registry at Start.
type Option func(*Registry)

// WithBasicAuth makes the registry require HTTP basic authentication as
// user with password on every request, as a registry behind a simple
// reverse proxy does.
func WithBasicAuth(user, password string) Option {
	return func(r *Registry) {
		r.login = &login{user: user, password: password}
		r.handler = r.login.basic(r.handler)
	}
}

// WithTokenAuth makes the registry require bearer tokens, as Docker Hub,
// Harbor and the cloud registries do: a client without one is sent to the
// token endpoint (/token), which hands one out for user and password.
func WithTokenAuth(user, password string) Option {
	return func(r *Registry) {
		r.login = &login{user: user, password: password, tokens: map[string]bool{}}
		r.handler = r.login.bearer(r.handler)
	}
}

// DockerConfigJSON is a docker config (and kubernetes.io/dockerconfigjson
// Secret's content) that logs in to the registry; empty auths when it is
// open to all.
func (r *Registry) DockerConfigJSON() []byte {
	auths := map[string]any{}
	if r.login != nil {
		auths[r.Host()] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(r.login.user + ":" + r.login.password))}
	}
	raw, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		panic(err) // a map of strings always marshals
	}
	return raw
}

// login is who may use a registry.
type login struct {
	user, password string

	mu     sync.Mutex
	tokens map[string]bool
}

func (l *login) valid(req *http.Request) bool {
	user, password, ok := req.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(user), []byte(l.user)) == 1 &&
		subtle.ConstantTimeCompare([]byte(password), []byte(l.password)) == 1
}

func (l *login) basic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !l.valid(req) {
			unauthorized(w, `Basic realm="testregistry"`)
			return
		}
		next.ServeHTTP(w, req)
	})
}

func (l *login) bearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/token" {
			l.issue(w, req)
			return
		}
		token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		l.mu.Lock()
		known := ok && l.tokens[token]
		l.mu.Unlock()
		if !known {
			unauthorized(w, fmt.Sprintf(`Bearer realm="http://%s/token",service="testregistry"`, req.Host))
			return
		}
		next.ServeHTTP(w, req)
	})
}

// issue hands out a token for the right user and password. Tokens are
// not scoped: the registry has one user.
func (l *login) issue(w http.ResponseWriter, req *http.Request) {
	if !l.valid(req) {
		unauthorized(w, `Basic realm="testregistry"`)
		return
	}
	token := rand.Text()
	l.mu.Lock()
	l.tokens[token] = true
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"token": token, "access_token": token})
}

// unauthorized answers as the distribution spec says: 401, the challenge,
// and an UNAUTHORIZED error.
func unauthorized(w http.ResponseWriter, challenge string) {
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
}
