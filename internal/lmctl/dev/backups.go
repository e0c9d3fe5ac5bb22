package dev

import (
	"fmt"
	"os"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
)

// BackupIdentityFile is the file in the state directory that holds the dev
// fleet's backup identity: `lmctl backup restore --identity` reads it. The
// operator gets only its public key, as in production.
const BackupIdentityFile = "backup-identity.txt"

// backupSchedule backs up every dev runtime every five minutes into the dev
// registry, so that `lmctl backup list` has something to show within a
// session.
const backupSchedule = `schedules:
  - name: dev
    schedule: "*/5 * * * *"
    repository: %s/backups
    recipients: [%s]
`

// devBackups writes a new backup identity to identityPath and returns the
// dev fleet's backup schedule, encrypting to its recipient: the same
// controller as in production, into the local registry.
func devBackups(registryHost, identityPath string) (*backup.Schedules, error) {
	identity, recipient, err := backup.NewIdentity()
	if err != nil {
		return nil, fmt.Errorf("creating the backup identity: %w", err)
	}
	content := fmt.Sprintf("# lmctl dev's backup identity; its public key: %s\n%s\n", recipient, identity)
	if err := os.WriteFile(identityPath, []byte(content), 0o600); err != nil {
		return nil, fmt.Errorf("writing the backup identity: %w", err)
	}
	schedules, err := backup.Parse(fmt.Appendf(nil, backupSchedule, registryHost, recipient))
	if err != nil {
		return nil, fmt.Errorf("the dev backup schedule: %w", err)
	}
	return schedules, nil
}
