package kyma

import (
	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/redact"
)

// redactStatus removes credentials from the texts of a status before it is
// mirrored into the runtime. Module messages quote Manifest errors, and those
// may quote a content link with its user info or query token; the control
// plane keeps them, the runtime never sees them.
func redactStatus(status *v1beta2.KymaStatus) {
	status.Operation = redact.Text(status.Operation)
	for i := range status.Conditions {
		status.Conditions[i].Message = redact.Text(status.Conditions[i].Message)
	}
	for i := range status.Modules {
		status.Modules[i].Message = redact.Text(status.Modules[i].Message)
	}
}
