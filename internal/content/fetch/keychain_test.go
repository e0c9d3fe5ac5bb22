package fetch_test

import (
	"encoding/base64"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/internal/content/fetch"
)

func TestDockerConfigKeychain(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("robot:s3cret"))
	config := []byte(`{"auths": {
		"registry.example:5000": {"auth": "` + auth + `"},
		"https://index.docker.io/v1/": {"username": "hub", "password": "hubpass"},
		"https://ghcr.io": {"identitytoken": "tok"}
	}}`)
	keychain, err := fetch.DockerConfigKeychain(config)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	tests := []struct {
		name string
		repo string
		want authn.AuthConfig
	}{
		{name: "auth field", repo: "registry.example:5000/modules/a", want: authn.AuthConfig{Username: "robot", Password: "s3cret"}},
		{name: "docker hub written as URL", repo: "library/busybox", want: authn.AuthConfig{Username: "hub", Password: "hubpass"}},
		{name: "host written as URL", repo: "ghcr.io/org/module", want: authn.AuthConfig{IdentityToken: "tok"}},
		{name: "unknown registry is anonymous", repo: "other.example/x", want: authn.AuthConfig{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			repo, err := name.NewRepository(tt.repo)
			g.Expect(err).NotTo(HaveOccurred())
			authenticator, err := keychain.Resolve(repo)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := authenticator.Authorization()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Username).To(Equal(tt.want.Username))
			g.Expect(got.Password).To(Equal(tt.want.Password))
			g.Expect(got.IdentityToken).To(Equal(tt.want.IdentityToken))
		})
	}
}

func TestDockerConfigKeychainErrorsHoldNoSecret(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{name: "not JSON", config: `{"auths": {"r": {"password": "s3cret"`, want: "dockerconfigjson"},
		{name: "auth without colon", config: `{"auths": {"r": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("s3cret")) + `"}}}`, want: "base64(username:password)"},
		{name: "no auths", config: `{}`, want: "no auths"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := fetch.DockerConfigKeychain([]byte(tt.config))
			g.Expect(err).To(MatchError(ContainSubstring(tt.want)))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
			g.Expect(err.Error()).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte("s3cret"))))
		})
	}
}
