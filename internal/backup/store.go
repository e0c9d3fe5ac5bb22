package backup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/runtime-fleet/lifecycle-manager/internal/ociartifact"
)

// Media types of a backup artifact: our own, so that nothing mistakes a
// backup for an image or a module, and its one layer says it is
// age-encrypted.
const (
	ArtifactType   types.MediaType = "application/vnd.runtime-fleet.backup.v1+json"
	LayerMediaType types.MediaType = "application/vnd.runtime-fleet.backup.snapshot.v1+json.age"
)

// AnnotationKeyFingerprints is the backup artifact's manifest annotation
// that lists the fingerprints of the keys it was encrypted to, comma-
// separated: whoever restores sees which identity a backup needs before
// trying one.
const AnnotationKeyFingerprints = "io.runtime-fleet.backup.key-fingerprints"

// TagLayout is the layout of a backup's tag, its time in UTC: tags sort in
// time order and read as times.
const TagLayout = "20060102T150405Z"

// maxBackupBytes bounds what a restore reads: a snapshot is a Kyma and a
// few custom resources.
const maxBackupBytes = 16 << 20

// Tag is the tag of the backup taken at t.
func Tag(t time.Time) string { return t.UTC().Format(TagLayout) }

// ParseTag is the time a backup's tag stands for.
func ParseTag(tag string) (time.Time, error) { return time.Parse(TagLayout, tag) }

// StoreOptions say how the registry is reached: the operator's content
// options (insecure registries, the registry credentials).
type StoreOptions struct {
	// InsecureRegistries are hosts (host:port) reached over plain HTTP.
	InsecureRegistries []string
	// Keychain authenticates; anonymous when nil.
	Keychain authn.Keychain
}

// Store keeps the backups of runtimes in one OCI repository, a repository
// per Kyma under it (<repository>/<kyma>), one artifact per backup tagged
// with its time.
type Store struct {
	repository string
	opts       StoreOptions
}

// NewStore is the store of the given repository (host/path).
func NewStore(repository string, opts StoreOptions) *Store {
	return &Store{repository: strings.TrimSuffix(repository, "/"), opts: opts}
}

// Info is one stored backup.
type Info struct {
	Tag  string
	Time time.Time
	// Digest is the artifact's; Size its encrypted layer's, in bytes.
	Digest string
	Size   int64
	// KeyFingerprints are those of the keys it was encrypted to (when
	// described, or stored by this operator).
	KeyFingerprints []string
}

// Ref is where the backup of the Kyma with the tag is, for messages.
func (s *Store) Ref(kyma, tag string) string { return s.repository + "/" + kyma + ":" + tag }

func (s *Store) repo(kyma string) (name.Repository, error) {
	var nameOpts []name.Option
	host, _, _ := strings.Cut(s.repository, "/")
	if slices.Contains(s.opts.InsecureRegistries, host) {
		nameOpts = append(nameOpts, name.Insecure)
	}
	repo, err := name.NewRepository(s.repository+"/"+kyma, nameOpts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("backup repository %q: %w", s.repository+"/"+kyma, err)
	}
	return repo, nil
}

func (s *Store) remoteOptions(ctx context.Context) []remote.Option {
	ro := []remote.Option{remote.WithContext(ctx)}
	if s.opts.Keychain != nil {
		ro = append(ro, remote.WithAuthFromKeychain(s.opts.Keychain))
	}
	return ro
}

// Push stores an encrypted snapshot of the Kyma taken at t, with the
// fingerprints of the keys it was encrypted to.
func (s *Store) Push(ctx context.Context, kyma string, t time.Time, encrypted []byte, keyFingerprints []string) (Info, error) {
	repo, err := s.repo(kyma)
	if err != nil {
		return Info{}, err
	}
	tag := Tag(t)
	layer := static.NewLayer(encrypted, LayerMediaType)
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), ArtifactType)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, Annotations: map[string]string{
		"org.opencontainers.image.title":   kyma + "-" + tag,
		"org.opencontainers.image.created": t.UTC().Format(time.RFC3339),
	}})
	if err != nil {
		return Info{}, err
	}
	img, ok := mutate.Annotations(img, map[string]string{AnnotationKeyFingerprints: strings.Join(keyFingerprints, ",")}).(v1.Image)
	if !ok {
		return Info{}, errors.New("annotating the backup artifact")
	}
	if err := remote.Write(repo.Tag(tag), img, s.remoteOptions(ctx)...); err != nil {
		return Info{}, fmt.Errorf("pushing backup %s: %w", s.Ref(kyma, tag), ociartifact.WithoutBody(err))
	}
	digest, err := img.Digest()
	if err != nil {
		return Info{}, err
	}
	return Info{Tag: tag, Time: t.UTC().Truncate(time.Second), Digest: digest.String(), Size: int64(len(encrypted)), KeyFingerprints: keyFingerprints}, nil
}

// List is the Kyma's backups, oldest first; none when the repository does
// not exist. Tags that are not backup times are not ours and left out.
func (s *Store) List(ctx context.Context, kyma string) ([]Info, error) {
	repo, err := s.repo(kyma)
	if err != nil {
		return nil, err
	}
	tags, err := remote.List(repo, s.remoteOptions(ctx)...)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing the backups in %s: %w", repo, ociartifact.WithoutBody(err))
	}
	var out []Info
	for _, tag := range tags {
		if t, err := ParseTag(tag); err == nil {
			out = append(out, Info{Tag: tag, Time: t})
		}
	}
	slices.SortFunc(out, func(a, b Info) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// Sealed is a backup as stored: the encrypted snapshot, and the
// fingerprints of the keys it was encrypted to (none for backups stored
// before they were recorded).
type Sealed struct {
	Data            []byte
	KeyFingerprints []string
}

// Fetch reads the encrypted snapshot of one backup.
func (s *Store) Fetch(ctx context.Context, kyma, tag string) (Sealed, error) {
	repo, err := s.repo(kyma)
	if err != nil {
		return Sealed{}, err
	}
	ref := s.Ref(kyma, tag)
	img, err := remote.Image(repo.Tag(tag), s.remoteOptions(ctx)...)
	if err != nil {
		if isNotFound(err) {
			return Sealed{}, fmt.Errorf("backup %s does not exist", ref)
		}
		return Sealed{}, fmt.Errorf("reading backup %s: %w", ref, ociartifact.WithoutBody(err))
	}
	manifest, err := img.Manifest()
	if err != nil {
		return Sealed{}, fmt.Errorf("reading backup %s: %w", ref, ociartifact.WithoutBody(err))
	}
	layers, err := img.Layers()
	if err != nil {
		return Sealed{}, fmt.Errorf("reading backup %s: %w", ref, ociartifact.WithoutBody(err))
	}
	if len(layers) != 1 {
		return Sealed{}, fmt.Errorf("backup %s has %d layers, a backup has one", ref, len(layers))
	}
	if mt, err := layers[0].MediaType(); err != nil || mt != LayerMediaType {
		return Sealed{}, fmt.Errorf("backup %s is not a backup (layer media type %q, want %q)", ref, mt, LayerMediaType)
	}
	data, err := ociartifact.ReadLayer(ctx, layers[0], maxBackupBytes)
	if err != nil {
		return Sealed{}, fmt.Errorf("reading backup %s: %w", ref, err)
	}
	return Sealed{Data: data, KeyFingerprints: fingerprintsOf(manifest)}, nil
}

// Delete removes one backup. The tag is deleted first (the OCI
// distribution spec lets registries support it), then the manifest by
// digest (which registries that do not delete tags support, and which
// removes its tags there); what is already gone is not an error.
func (s *Store) Delete(ctx context.Context, kyma, tag string) error {
	repo, err := s.repo(kyma)
	if err != nil {
		return err
	}
	ref := s.Ref(kyma, tag)
	desc, err := remote.Head(repo.Tag(tag), s.remoteOptions(ctx)...)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("deleting backup %s: %w", ref, ociartifact.WithoutBody(err))
	}
	if err := remote.Delete(repo.Tag(tag), s.remoteOptions(ctx)...); err != nil && !isNotFound(err) && !isUnsupported(err) {
		return fmt.Errorf("deleting backup %s: %w", ref, ociartifact.WithoutBody(err))
	}
	if err := remote.Delete(repo.Digest(desc.Digest.String()), s.remoteOptions(ctx)...); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting backup %s: %w", ref, ociartifact.WithoutBody(err))
	}
	return nil
}

// DeleteAll removes every backup of the Kyma.
func (s *Store) DeleteAll(ctx context.Context, kyma string) error {
	infos, err := s.List(ctx, kyma)
	if err != nil {
		return err
	}
	var errs []error
	for _, i := range infos {
		errs = append(errs, s.Delete(ctx, kyma, i.Tag))
	}
	return errors.Join(errs...)
}

// Describe fills in the digest and size of a listed backup.
func (s *Store) Describe(ctx context.Context, kyma string, info Info) (Info, error) {
	repo, err := s.repo(kyma)
	if err != nil {
		return info, err
	}
	m, err := remote.Get(repo.Tag(info.Tag), s.remoteOptions(ctx)...)
	if err != nil {
		return info, fmt.Errorf("reading backup %s: %w", s.Ref(kyma, info.Tag), ociartifact.WithoutBody(err))
	}
	info.Digest = m.Digest.String()
	manifest, err := v1.ParseManifest(strings.NewReader(string(m.Manifest)))
	if err == nil && len(manifest.Layers) == 1 {
		info.Size = manifest.Layers[0].Size
	}
	if err == nil {
		info.KeyFingerprints = fingerprintsOf(manifest)
	}
	return info, nil
}

// fingerprintsOf reads a backup artifact's key fingerprints annotation.
func fingerprintsOf(m *v1.Manifest) []string {
	if m == nil || m.Annotations[AnnotationKeyFingerprints] == "" {
		return nil
	}
	return strings.Split(m.Annotations[AnnotationKeyFingerprints], ",")
}

func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// isUnsupported is a registry that does not delete tags.
func isUnsupported(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && (terr.StatusCode == http.StatusMethodNotAllowed || terr.StatusCode == http.StatusBadRequest ||
		terr.StatusCode == http.StatusUnsupportedMediaType)
}
