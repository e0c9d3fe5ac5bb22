package consoleauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"html/template"
	"net/http"
	"net/url"
	"time"
)

// CSRFCookie holds the login form's double-submit token.
const CSRFCookie = "lifecycle-console-csrf"

// Bounds of the login form.
const (
	// maxLoginBody bounds a login POST: a token is a few KiB at most
	// (an OIDC ID token with many groups), and a cookie holds 4 KiB.
	maxLoginBody = 64 << 10
	// csrfLifetime is how long a login form stays usable.
	csrfLifetime = 10 * time.Minute
	// DefaultSessionLifetime is how long the token cookie lives; the token's
	// own expiry, checked by every TokenReview, may end it sooner.
	DefaultSessionLifetime = 8 * time.Hour
)

// Login serves the login form at its path: GET shows it, POST checks the
// token with a TokenReview and stores it in TokenCookie, then sends the
// browser to "/".
//
// CSRF protection of the POST is twofold: a double-submit token (a
// random value in an HttpOnly, SameSite=Strict cookie that the form must
// echo; another site can neither read the cookie nor make the browser send
// it), and, when the browser sends Origin, an Origin that must be this
// console's own. A login CSRF would otherwise log a victim in as the
// attacker.
type Login struct {
	Reviewer *TokenReviewer
	// SessionLifetime is the token cookie's Max-Age; DefaultSessionLifetime
	// when zero.
	SessionLifetime time.Duration
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Log in: Lifecycle Manager console</title>
<style>body{font-family:sans-serif;max-width:32rem;margin:3rem auto}textarea{width:100%;height:8rem}.error{color:#a00;font-weight:bold}</style>
</head><body><main>
<h1>Log in to the Lifecycle Manager console</h1>
{{if .Error}}<p class="error" role="alert">Error: {{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}">
<label for="token">Bearer token (for example from <code>kubectl create token NAME</code>)</label>
<textarea id="token" name="token" autocomplete="off" required autofocus></textarea>
<input type="hidden" name="csrf" value="{{.CSRF}}">
<p><button type="submit">Log in</button></p>
</form>
<p>You see only what your Kubernetes RBAC lets you list.</p>
</main></body></html>
`))

type loginView struct {
	Action, CSRF, Error string
}

// ServeHTTP implements http.Handler.
func (l *Login) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	switch r.Method {
	case http.MethodGet:
		l.form(w, r, http.StatusOK, "")
	case http.MethodPost:
		l.login(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "the login page takes GET and POST only", http.StatusMethodNotAllowed)
	}
}

func (l *Login) login(w http.ResponseWriter, r *http.Request) {
	if !l.sameOrigin(w, r) {
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		l.form(w, r, http.StatusBadRequest, "paste a bearer token")
		return
	}
	if _, err := l.Reviewer.Review(r.Context(), token); err != nil {
		// Neither the token nor the review's details are shown: the page
		// says what to do.
		l.form(w, r, http.StatusUnauthorized, "the API server does not accept this token; check that it is current and meant for this cluster")
		return
	}
	lifetime := l.SessionLifetime
	if lifetime <= 0 {
		lifetime = DefaultSessionLifetime
	}
	http.SetCookie(w, sessionCookie(TokenCookie, token, "/", lifetime))
	http.SetCookie(w, sessionCookie(CSRFCookie, "", r.URL.Path, -1))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// sameOrigin checks a POST against CSRF: the Origin header, when sent, must
// be this host, and the form's csrf field must equal the CSRF cookie. It
// answers 403 itself when not.
func (l *Login) sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the login form could not be read; reload the page and try again", http.StatusBadRequest)
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			http.Error(w, "the form was sent from another site; open the console's own login page", http.StatusForbidden)
			return false
		}
	}
	c, err := r.Cookie(CSRFCookie)
	sent := r.PostForm.Get("csrf")
	if err != nil || c.Value == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(sent)) != 1 {
		http.Error(w, "the login form expired or was not this console's; reload the login page and try again", http.StatusForbidden)
		return false
	}
	return true
}

// form shows the login form with a fresh CSRF token.
func (l *Login) form(w http.ResponseWriter, r *http.Request, status int, message string) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		http.Error(w, "no randomness for the login form", http.StatusInternalServerError)
		return
	}
	csrf := hex.EncodeToString(buf)
	path := r.URL.Path
	http.SetCookie(w, sessionCookie(CSRFCookie, csrf, path, csrfLifetime))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, loginView{Action: path, CSRF: csrf, Error: message})
}

// sessionCookie is an HttpOnly, Secure, SameSite=Strict cookie; a negative
// lifetime deletes it.
func sessionCookie(name, value, path string, lifetime time.Duration) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: path, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode}
	if lifetime < 0 {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(lifetime / time.Second)
	}
	return c
}
