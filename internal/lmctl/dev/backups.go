package dev

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
)

// BackupKeySecret is the Secret that holds the dev fleet's backup key.
const BackupKeySecret = "lmctl-dev-backup-key"

// backupSchedule backs up every dev runtime every five minutes into the dev
// registry, so that `lmctl backup list` has something to show within a
// session.
const backupSchedule = `schedules:
  - name: dev
    schedule: "*/5 * * * *"
    repository: %s/backups
    keySecret: %s
`

// devBackups creates the dev fleet's backup key and returns its backup
// schedule: the same controller as in production, into the local registry.
func devBackups(ctx context.Context, kcp *rest.Config, namespace, registryHost string) (*backup.Schedules, error) {
	c, err := client.New(kcp, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating the backup key: %w", err)
	}
	secret, err := backup.NewKeySecret(namespace, BackupKeySecret)
	if err != nil {
		return nil, fmt.Errorf("creating the backup key: %w", err)
	}
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the backup key Secret %s/%s: %w", namespace, BackupKeySecret, err)
	}
	schedules, err := backup.Parse(fmt.Appendf(nil, backupSchedule, registryHost, BackupKeySecret))
	if err != nil {
		return nil, fmt.Errorf("the dev backup schedule: %w", err)
	}
	return schedules, nil
}
