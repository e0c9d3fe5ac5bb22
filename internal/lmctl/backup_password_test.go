package lmctl

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	lmbackup "github.com/runtime-fleet/lifecycle-manager/internal/lmctl/backup"
)

// The registry password comes from stdin when asked, else from the
// environment, and only with a user; there is no flag that would show it.
func TestBackupRegistryPassword(t *testing.T) {
	t.Setenv(lmbackup.PasswordEnv, "from-env")
	for _, tt := range []struct {
		name, user, stdin string
		fromStdin         bool
		want, err         string
	}{
		{name: "the environment", user: "u", want: "from-env"},
		{name: "stdin, one line", user: "u", fromStdin: true, stdin: "from-stdin\r\nignored\n", want: "from-stdin"},
		{name: "stdin without a newline", user: "u", fromStdin: true, stdin: "from-stdin", want: "from-stdin"},
		{name: "no user: none", want: ""},
		{name: "stdin without a user", fromStdin: true, stdin: "p\n", err: "--registry-password-stdin without --registry-username"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f := backupFlags{passwordStdin: tt.fromStdin, credentials: lmbackup.Credentials{Username: tt.user}}
			got, err := f.password(strings.NewReader(tt.stdin))
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
	cmd := newBackupListCommand()
	g := NewWithT(t)
	g.Expect(cmd.Flags().Lookup("registry-password")).To(BeNil(), "no password flag")
	g.Expect(cmd.Flags().Lookup("registry-credentials-secret")).NotTo(BeNil())
	g.Expect(newBackupRestoreCommand().Flags().Lookup("identity")).NotTo(BeNil())
}
