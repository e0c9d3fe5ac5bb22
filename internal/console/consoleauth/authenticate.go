// Package consoleauth authenticates the viewers of the in-cluster console
// and decides what each may see, both by asking the API server: a bearer
// token is checked with a TokenReview, a right with a SubjectAccessReview.
// The console's ServiceAccount needs create on tokenreviews and
// subjectaccessreviews for that, and nothing else beyond reading the CRs it
// shows.
package consoleauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"

	"github.com/runtime-fleet/lifecycle-manager/internal/console"
)

// TokenCookie holds a viewer's bearer token after the login form; it is
// HttpOnly, Secure and SameSite=Strict, so that no script and no other site
// can use it.
const TokenCookie = "lifecycle-console-token"

// Anonymous is the viewer of a request without credentials when anonymous
// access is allowed; the API server's authorizer still decides what it may
// see (SubjectAccess).
var Anonymous = console.Viewer{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}

// Defaults of TokenReviewer.
const (
	DefaultTokenTTL        = 10 * time.Second
	DefaultTokenMaxEntries = 10000
)

// ErrNoCredentials says that the request carries no bearer token and anonymous
// access is off.
var ErrNoCredentials = errors.New("no bearer token: send an Authorization: Bearer header or log in at /login")

// ErrNotBearer says that the Authorization header holds another scheme than Bearer.
var ErrNotBearer = errors.New("the Authorization header is not \"Bearer <token>\": the console accepts bearer tokens only")

// ErrTokenRejected says that the API server does not accept the token.
var ErrTokenRejected = errors.New("the API server does not accept the bearer token: log in again with a valid token")

// TokenReviewer answers console.Authenticator with a TokenReview of the
// request's bearer token, from the Authorization header or the login
// cookie. Reviews are cached for a short TTL, keyed by the token's SHA-256
// (the token itself is kept nowhere), so that the page and its live
// fragments do not cost a review each; a revoked token is refused within
// the TTL.
type TokenReviewer struct {
	reviews        authenticationv1client.TokenReviewInterface
	audiences      []string
	allowAnonymous bool
	cache          *ttlCache[tokenReview]
}

// tokenReview is a cached TokenReview answer.
type tokenReview struct {
	viewer        console.Viewer
	authenticated bool
}

// TokenReviewerOptions configure a TokenReviewer.
type TokenReviewerOptions struct {
	// Audiences the token must be meant for; none accepts the API
	// server's own audiences.
	Audiences []string
	// AllowAnonymous maps requests without a token to Anonymous instead of
	// refusing them. A token that is sent and refused is refused either way.
	AllowAnonymous bool
	// Cache bounds the cache of reviews.
	Cache CacheOptions
}

var _ console.Authenticator = (*TokenReviewer)(nil)

// NewTokenReviewer returns a TokenReviewer that creates its reviews with
// reviews.
func NewTokenReviewer(reviews authenticationv1client.TokenReviewInterface, opts TokenReviewerOptions) *TokenReviewer {
	return &TokenReviewer{
		reviews: reviews, audiences: opts.Audiences, allowAnonymous: opts.AllowAnonymous,
		cache: newCache[tokenReview](opts.Cache, DefaultTokenTTL, DefaultTokenMaxEntries),
	}
}

// Authenticate implements console.Authenticator.
func (a *TokenReviewer) Authenticate(r *http.Request) (console.Viewer, error) {
	token, sent := BearerToken(r)
	if sent && token == "" {
		return console.Viewer{}, ErrNotBearer
	}
	if token == "" {
		if a.allowAnonymous {
			return Anonymous, nil
		}
		return console.Viewer{}, ErrNoCredentials
	}
	return a.Review(r.Context(), token)
}

// Review returns the viewer a token authenticates; the login form checks a
// token with it before storing it in the cookie.
func (a *TokenReviewer) Review(ctx context.Context, token string) (console.Viewer, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if r, ok := a.cache.get(key); ok {
		if !r.authenticated {
			return console.Viewer{}, ErrTokenRejected
		}
		return r.viewer, nil
	}
	review, err := a.reviews.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		// The error of a failed request never quotes the token: client-go
		// does not put request bodies in errors.
		return console.Viewer{}, fmt.Errorf("asking the API server to review a bearer token: %w", err)
	}
	if !review.Status.Authenticated {
		// Refusals are cached too: a client repeating a bad token must not
		// make the console repeat its review.
		a.cache.put(key, tokenReview{})
		return console.Viewer{}, ErrTokenRejected
	}
	u := review.Status.User
	v := console.Viewer{Name: u.Username, Groups: u.Groups}
	if len(u.Extra) > 0 {
		v.Extra = make(map[string][]string, len(u.Extra))
		for k, vals := range u.Extra {
			v.Extra[k] = vals
		}
	}
	a.cache.put(key, tokenReview{viewer: v, authenticated: true})
	return v, nil
}

// BearerToken is the request's token: the Authorization header's, else the
// login cookie's. sent says that credentials were sent at all: an
// Authorization header that is not a bearer token sends credentials the
// console cannot check, which must not pass for no credentials (and so
// for anonymous).
func BearerToken(r *http.Request) (token string, sent bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(token), true
		}
		return "", true
	}
	if c, err := r.Cookie(TokenCookie); err == nil && c.Value != "" {
		return c.Value, true
	}
	return "", false
}
