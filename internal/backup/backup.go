package backup

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Save encrypts a snapshot to the recipients and stores it, tagged with its
// time and annotated with the recipients' fingerprints.
func Save(ctx context.Context, store *Store, recipients Recipients, s *Snapshot) (Info, error) {
	plain, err := s.Encode()
	if err != nil {
		return Info{}, fmt.Errorf("encoding the snapshot: %w", err)
	}
	encrypted, err := recipients.Encrypt(plain)
	if err != nil {
		return Info{}, err
	}
	return store.Push(ctx, s.Kyma, s.TakenAt, encrypted, recipients.Fingerprints())
}

// Open reads and decrypts one backup of the Kyma; identities that do not
// match are refused with ErrWrongKey, naming the backup and the keys it
// needs.
func Open(ctx context.Context, store *Store, ids *Identities, kyma, tag string) (*Snapshot, error) {
	sealed, err := store.Fetch(ctx, kyma, tag)
	if err != nil {
		return nil, err
	}
	plain, err := ids.Decrypt(store.Ref(kyma, tag), sealed.KeyFingerprints, sealed.Data)
	if err != nil {
		return nil, err
	}
	s, err := Decode(plain)
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", store.Ref(kyma, tag), err)
	}
	if s.Kyma != kyma {
		return nil, fmt.Errorf("backup %s is of Kyma %s, not %s", store.Ref(kyma, tag), s.Kyma, kyma)
	}
	return s, nil
}

// Thin deletes the Kyma's backups that the retention does not keep at now
// and returns those left. A backup that fails to delete stays listed and is
// tried again next time.
func Thin(ctx context.Context, store *Store, kyma string, now time.Time, r Retention, loc *time.Location) ([]Info, error) {
	infos, err := store.List(ctx, kyma)
	if err != nil {
		return nil, err
	}
	times := make([]time.Time, len(infos))
	for i, info := range infos {
		times[i] = info.Time
	}
	drop := Drop(times, now, r, loc)
	var left []Info
	var errs []error
	for _, info := range infos {
		if !containsTime(drop, info.Time) {
			left = append(left, info)
			continue
		}
		if err := store.Delete(ctx, kyma, info.Tag); err != nil {
			errs = append(errs, err)
			left = append(left, info)
		}
	}
	return left, errors.Join(errs...)
}

func containsTime(ts []time.Time, t time.Time) bool {
	for _, x := range ts {
		if x.Equal(t) {
			return true
		}
	}
	return false
}
