package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
)

// Keys of the key Secret a schedule's keySecret names.
const (
	// RecipientsKey holds age recipients (public keys, "age1…"), one a line,
	// as in an age recipients file: what the operator encrypts to.
	RecipientsKey = "recipients"
	// IdentityKey is where operators before recipients kept the age
	// identity (the private key). It is still read, for the upgrade, and
	// only to derive its recipient.
	IdentityKey = "identity"
)

// ErrWrongKey is the cause of every refusal to decrypt a backup with
// identities it was not encrypted to.
var ErrWrongKey = errors.New("none of the given identities is one the backup was encrypted to")

// Fingerprint identifies a public key without being one: a short hash of
// its age encoding, shown in status, in `lmctl backup list` and in errors,
// so that an SRE can tell which key a backup needs.
func Fingerprint(recipient string) string {
	sum := sha256.Sum256([]byte(recipient))
	return hex.EncodeToString(sum[:6])
}

// Recipients are the public keys a backup is encrypted to; any one of their
// identities decrypts it. Several at once let an SRE rotate keys: add the
// new one, and remove the old one once nobody restores with it.
type Recipients struct {
	keys []string
	age  []age.Recipient
}

// ParseRecipients reads age recipients, one a line as in an age recipients
// file ("#" comments and blank lines skipped); from names where they come
// from, for errors. A private key given by mistake is refused without being
// quoted.
func ParseRecipients(text, from string) (Recipients, error) {
	var rs Recipients
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := rs.add(line); err != nil {
			return Recipients{}, fmt.Errorf("%s, line %d: %w", from, i+1, err)
		}
	}
	if rs.Len() == 0 {
		return Recipients{}, fmt.Errorf("%s lists no recipient: give the age public keys (age1…) backups are encrypted to", from)
	}
	return rs, nil
}

func (rs *Recipients) add(key string) error {
	if strings.HasPrefix(strings.ToUpper(key), "AGE-SECRET-KEY-") {
		return errors.New("this is an age identity, a private key: give its public key (age-keygen -y FILE prints it) and keep the identity outside the control plane")
	}
	parsed, err := age.ParseRecipients(strings.NewReader(key))
	if err != nil || len(parsed) != 1 {
		return errors.New("not an age recipient (age1… or age1pq1…)")
	}
	if slices.Contains(rs.keys, key) {
		return nil
	}
	rs.keys = append(rs.keys, key)
	rs.age = append(rs.age, parsed[0])
	return nil
}

// Union is both sets of recipients, each once.
func (rs Recipients) Union(other Recipients) Recipients {
	out := Recipients{keys: slices.Clone(rs.keys), age: slices.Clone(rs.age)}
	for i, k := range other.keys {
		if !slices.Contains(out.keys, k) {
			out.keys = append(out.keys, k)
			out.age = append(out.age, other.age[i])
		}
	}
	return out
}

// Len is how many recipients there are.
func (rs Recipients) Len() int { return len(rs.keys) }

// Fingerprints are the recipients' fingerprints, sorted.
func (rs Recipients) Fingerprints() []string {
	out := make([]string, len(rs.keys))
	for i, k := range rs.keys {
		out[i] = Fingerprint(k)
	}
	slices.Sort(out)
	return out
}

// Encrypt encrypts a snapshot's bytes to every recipient.
func (rs Recipients) Encrypt(plain []byte) ([]byte, error) {
	if rs.Len() == 0 {
		return nil, errors.New("encrypting: no recipients")
	}
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, rs.age...)
	if err != nil {
		// age refuses to mix post-quantum and classic recipients.
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	if _, err := w.Write(plain); err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	return buf.Bytes(), nil
}

// KeySecret is what the operator takes from a key Secret.
type KeySecret struct {
	Recipients Recipients
	// HoldsIdentity is a Secret that still has the private key: anyone
	// who reads Secrets in the namespace can decrypt every backup. The
	// operator warns until it is removed.
	HoldsIdentity bool
}

// ReadKeySecret reads the recipients of a key Secret: its "recipients"
// key, or, in a Secret written for an operator before recipients, the
// public part of its "identity". Errors name the Secret, never its content.
func ReadKeySecret(secret *corev1.Secret) (KeySecret, error) {
	ref := secret.Namespace + "/" + secret.Name
	_, holdsIdentity := secret.Data[IdentityKey]
	if raw, ok := secret.Data[RecipientsKey]; ok {
		rs, err := ParseRecipients(string(raw), fmt.Sprintf("key %q of the key Secret %s", RecipientsKey, ref))
		return KeySecret{Recipients: rs, HoldsIdentity: holdsIdentity}, err
	}
	if !holdsIdentity {
		return KeySecret{}, fmt.Errorf("the key Secret %s has no key %q: list the age public keys (age1…) backups are encrypted to there", ref, RecipientsKey)
	}
	ids, err := parseIdentities(secret.Data[IdentityKey], fmt.Sprintf("key %q of the key Secret %s", IdentityKey, ref))
	if err != nil {
		return KeySecret{}, err
	}
	var rs Recipients
	for _, r := range ids.recipients {
		if err := rs.add(r); err != nil {
			return KeySecret{}, err
		}
	}
	return KeySecret{Recipients: rs, HoldsIdentity: true}, nil
}

// Identities are private keys that decrypt backups: what whoever restores
// holds, never the operator. They never print their secret part.
type Identities struct {
	age []age.Identity
	// recipients are the identities' public keys, for fingerprints.
	recipients []string
	// From names where they came from, for messages.
	From string
}

// ReadIdentityFiles reads age identity files ("AGE-SECRET-KEY-1…", one a
// line, "#" comments), as age-keygen writes them; each file may hold
// several identities.
func ReadIdentityFiles(paths []string) (*Identities, error) {
	all := &Identities{From: strings.Join(paths, ", ")}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading the identity file: %w", err)
		}
		ids, err := parseIdentities(raw, "the identity file "+path)
		if err != nil {
			return nil, err
		}
		all.age = append(all.age, ids.age...)
		all.recipients = append(all.recipients, ids.recipients...)
	}
	if len(all.age) == 0 {
		return nil, errors.New("no identity file: give the age identity that decrypts the backups (--identity FILE)")
	}
	return all, nil
}

// IdentitiesFromSecret reads the identity of a key Secret written for an
// operator before recipients.
func IdentitiesFromSecret(secret *corev1.Secret) (*Identities, error) {
	ref := secret.Namespace + "/" + secret.Name
	raw, ok := secret.Data[IdentityKey]
	if !ok {
		return nil, fmt.Errorf("the key Secret %s has no key %q: it holds no private key; give the identity file (--identity FILE)", ref, IdentityKey)
	}
	ids, err := parseIdentities(raw, fmt.Sprintf("key %q of the key Secret %s", IdentityKey, ref))
	if err != nil {
		return nil, err
	}
	ids.From = "the key Secret " + ref
	return ids, nil
}

func parseIdentities(raw []byte, from string) (*Identities, error) {
	// age's parse errors give a line number and never quote the line.
	parsed, err := age.ParseIdentities(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (want age identities, AGE-SECRET-KEY-1…, one a line)", from, err)
	}
	ids := &Identities{From: from}
	for _, id := range parsed {
		ids.age = append(ids.age, id)
		ids.recipients = append(ids.recipients, publicKey(id))
	}
	return ids, nil
}

// publicKey is the age encoding of an identity's recipient.
func publicKey(id age.Identity) string {
	switch id := id.(type) {
	case *age.X25519Identity:
		return id.Recipient().String()
	case *age.HybridIdentity:
		return id.Recipient().String()
	}
	return ""
}

// Fingerprints are the fingerprints of the identities' public keys, sorted.
func (ids *Identities) Fingerprints() []string {
	out := make([]string, 0, len(ids.recipients))
	for _, r := range ids.recipients {
		out = append(out, Fingerprint(r))
	}
	slices.Sort(out)
	return out
}

// Decrypt decrypts the named backup, which says (needs) the fingerprints
// of the keys it was encrypted to. A backup none of the identities opens
// is refused with ErrWrongKey, naming the backup, the fingerprints it needs
// and those given.
func (ids *Identities) Decrypt(backup string, needs []string, cipher []byte) ([]byte, error) {
	r, err := age.Decrypt(bytes.NewReader(cipher), ids.age...)
	if err != nil {
		if _, ok := errors.AsType[*age.NoIdentityMatchError](err); ok {
			return nil, fmt.Errorf("backup %s is encrypted to the keys with fingerprints %s; the identities of %s have %s: %w",
				backup, listOrUnknown(needs), ids.From, listOrUnknown(ids.Fingerprints()), ErrWrongKey)
		}
		return nil, fmt.Errorf("backup %s cannot be decrypted: %w", backup, err)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("backup %s cannot be decrypted: %w", backup, err)
	}
	return plain, nil
}

func listOrUnknown(fingerprints []string) string {
	if len(fingerprints) == 0 {
		return "(not recorded)"
	}
	return strings.Join(fingerprints, ", ")
}

// NewIdentity makes a new age X25519 identity for the dev environment and
// tests: the identity file's content and its recipient.
func NewIdentity() (identity, recipient string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", "", err
	}
	return id.String(), id.Recipient().String(), nil
}
