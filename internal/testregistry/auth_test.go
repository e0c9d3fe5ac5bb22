package testregistry_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/internal/testregistry"
)

// A registry with a login lets in its user, through go-containerregistry's
// own client, and answers 401 to anyone else; an open one lets in everyone.
func TestLogin(t *testing.T) {
	right := authn.FromConfig(authn.AuthConfig{Username: "backup", Password: "s3cret"})
	wrong := authn.FromConfig(authn.AuthConfig{Username: "backup", Password: "guess"})
	for _, tt := range []struct {
		name    string
		opts    []testregistry.Option
		auth    authn.Authenticator
		allowed bool
	}{
		{"open, anonymous", nil, authn.Anonymous, true},
		{"basic, the user", []testregistry.Option{testregistry.WithBasicAuth("backup", "s3cret")}, right, true},
		{"basic, anonymous", []testregistry.Option{testregistry.WithBasicAuth("backup", "s3cret")}, authn.Anonymous, false},
		{"basic, a wrong password", []testregistry.Option{testregistry.WithBasicAuth("backup", "s3cret")}, wrong, false},
		{"token, the user", []testregistry.Option{testregistry.WithTokenAuth("backup", "s3cret")}, right, true},
		{"token, anonymous", []testregistry.Option{testregistry.WithTokenAuth("backup", "s3cret")}, authn.Anonymous, false},
		{"token, a wrong password", []testregistry.Option{testregistry.WithTokenAuth("backup", "s3cret")}, wrong, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			reg := testregistry.Start(tt.opts...)
			defer reg.Close()
			ref, err := name.ParseReference(reg.Host()+"/r/img:1", name.Insecure)
			g.Expect(err).NotTo(HaveOccurred())
			img, err := random.Image(64, 1)
			g.Expect(err).NotTo(HaveOccurred())

			err = remote.Write(ref, img, remote.WithAuth(tt.auth))
			if !tt.allowed {
				var terr *transport.Error
				g.Expect(errors.As(err, &terr)).To(BeTrue(), "%v", err)
				g.Expect(terr.StatusCode).To(Equal(http.StatusUnauthorized))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tags, err := remote.List(ref.Context(), remote.WithAuth(tt.auth))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tags).To(ConsistOf("1"))
		})
	}
}
