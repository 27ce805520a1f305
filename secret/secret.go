// Package secret keeps small secrets at rest: an organization's own vendor API keys.
// Each is sealed with AES-256-GCM under the installation's secret key, a 32-byte key
// kept in a file of its own beside the database (or where the operator says), never
// in the database: a copy of the database alone does not give the secrets away.
// The same file also gives the key that names the people enrichd holds data about by
// keyed hashes (SubjectKey): derived from it for that use alone, never the AES key.
//
// The key file holds the key as 64 hexadecimal characters. It must be readable by its
// owner alone: a file others may read is refused, never used. A sealed value is bound
// to what it is the secret of (its "label", such as an organization and a source), so
// a value copied onto another row does not open.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the length of the secret key, in bytes: AES-256.
const KeySize = 32

// ErrWrongKey is a sealed value that does not open under this key: it was sealed
// under another key file (a database restored without its own), or altered.
var ErrWrongKey = errors.New("the secret does not open under this installation's secret key: it was sealed under another key file, or altered")

// Box seals and opens secrets under one key.
type Box struct {
	aead       cipher.AEAD
	id         string
	subjectKey []byte
}

// New makes a Box of a KeySize-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("the secret key must be %d bytes, not %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("enrichd secret key id\x00"), key...))
	return &Box{aead: aead, id: hex.EncodeToString(sum[:4]), subjectKey: derive(key, "enrichd subject hashes v1")}, nil
}

// derive is a key of its own for purpose, made from the installation's key with
// HMAC-SHA256 (HKDF's expand step for one block): knowing it tells nothing of the key
// it came from, nor of another purpose's.
func derive(key []byte, purpose string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(purpose))
	mac.Write([]byte{1})
	return mac.Sum(nil)
}

// SubjectKey is the key of the keyed hashes (HMAC-SHA256) that name a person or a
// company in the database: their profile URL, email address or domain. Every process
// serving one database must have the same one (the same key file), or the hashes one
// writes name nobody for another. A copy of its bytes is returned.
func (b *Box) SubjectKey() []byte { return append([]byte(nil), b.subjectKey...) }

// ID names the key without giving anything of it away: stored beside each sealed
// value, it tells a value sealed under another key file from one altered.
func (b *Box) ID() string { return b.id }

// Seal encrypts plain for label with a fresh random nonce, as base64 text.
func (b *Box) Seal(plain []byte, label string) (string, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := b.aead.Seal(nonce, nonce, plain, []byte(label))
	return base64.StdEncoding.EncodeToString(out), nil
}

// Open decrypts what Seal made for label, or returns ErrWrongKey.
func (b *Box) Open(sealed, label string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	n := b.aead.NonceSize()
	if err != nil || len(raw) < n+b.aead.Overhead() {
		return nil, ErrWrongKey
	}
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], []byte(label))
	if err != nil {
		return nil, ErrWrongKey
	}
	return plain, nil
}

// Load reads the key file at path. It refuses a file that its group or others may
// read or write, and one that does not hold a key.
func Load(path string) (*Box, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("the secret key file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("the secret key file %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("the secret key file %s may be read by others (mode %04o): make it readable by its owner alone (chmod 600 %s)", path, perm, path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the secret key file: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(key) != KeySize {
		return nil, fmt.Errorf("the secret key file %s does not hold a key: want %d hexadecimal characters", path, 2*KeySize)
	}
	return New(key)
}

// LoadOrCreate reads the key file at path, creating it with a new random key, mode
// 0600, when it does not exist. created says it was made now.
func LoadOrCreate(path string) (box *Box, created bool, err error) {
	box, err = Load(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return box, false, err
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	// O_EXCL: two processes starting at once do not each write a key, one of which
	// would then seal secrets the other cannot open.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		box, err = Load(path)
		return box, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("creating the secret key file: %w", err)
	}
	_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
	if serr := f.Sync(); werr == nil {
		werr = serr
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return nil, false, fmt.Errorf("writing the secret key file: %w", werr)
	}
	box, err = New(key)
	return box, true, err
}

// Last4 is how a secret is shown once stored: its last 4 characters, the rest masked.
func Last4(s string) string {
	r := []rune(s)
	if len(r) <= 4 {
		// A key this short shows nothing of itself.
		return "…"
	}
	return "…" + string(r[len(r)-4:])
}
