package backup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/runtime-fleet/lifecycle-manager/api/v1beta2"
	"github.com/runtime-fleet/lifecycle-manager/internal/backup"
)

// status.backups keeps what it knew of each backup still held (size, key
// fingerprints) and learns the latest's; a backup listed only by the
// registry has neither.
func TestRecords(t *testing.T) {
	at := func(h int) backup.Info {
		ts := time.Date(2026, 1, 5, h, 0, 0, 0, time.UTC)
		return backup.Info{Tag: backup.Tag(ts), Time: ts}
	}
	latest := at(3)
	latest.Size, latest.KeyFingerprints = 30, []string{"new"}
	for _, tt := range []struct {
		name   string
		held   []backup.Info
		before []v1beta2.BackupRecord
		want   []v1beta2.BackupRecord
	}{
		{
			name:   "kept knowledge, newest first, dropped backups gone",
			held:   []backup.Info{at(1), at(2), latest},
			before: []v1beta2.BackupRecord{{Tag: at(2).Tag, Size: 20, KeyFingerprints: []string{"new", "old"}}, {Tag: at(1).Tag, Size: 10, KeyFingerprints: []string{"old"}}, {Tag: at(0).Tag, Size: 1}},
			want: []v1beta2.BackupRecord{
				{Tag: latest.Tag, Size: 30, KeyFingerprints: []string{"new"}},
				{Tag: at(2).Tag, Size: 20, KeyFingerprints: []string{"new", "old"}},
				{Tag: at(1).Tag, Size: 10, KeyFingerprints: []string{"old"}},
			},
		},
		{
			name: "a backup only the registry lists",
			held: []backup.Info{at(1), latest},
			want: []v1beta2.BackupRecord{{Tag: latest.Tag, Size: 30, KeyFingerprints: []string{"new"}}, {Tag: at(1).Tag}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(records(tt.held, tt.before, latest)).To(Equal(tt.want))
		})
	}
}
