package secret_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"

	"enrichd/secret"
)

func TestSealOpensUnderItsKeyAndLabelOnly(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	box, created, err := secret.LoadOrCreate(filepath.Join(dir, "k"))
	is.NoErr(err)
	is.True(created)
	sealed, err := box.Seal([]byte("pdl-key-123456"), "org-a/pdl")
	is.NoErr(err)
	is.True(!strings.Contains(sealed, "pdl-key"))
	plain, err := box.Open(sealed, "org-a/pdl")
	is.NoErr(err)
	is.Equal(string(plain), "pdl-key-123456")

	_, err = box.Open(sealed, "org-b/pdl") // moved to another row
	is.True(errors.Is(err, secret.ErrWrongKey))

	other, _, err := secret.LoadOrCreate(filepath.Join(dir, "other"))
	is.NoErr(err)
	_, err = other.Open(sealed, "org-a/pdl") // a database restored without its key file
	is.True(errors.Is(err, secret.ErrWrongKey))
	is.True(other.ID() != box.ID())

	again, created, err := secret.LoadOrCreate(filepath.Join(dir, "k"))
	is.NoErr(err)
	is.True(!created)
	is.Equal(again.ID(), box.ID())
	_, err = again.Open(sealed, "org-a/pdl")
	is.NoErr(err)
}

func TestKeyFileMode(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "k")
	_, _, err := secret.LoadOrCreate(path)
	is.NoErr(err)
	info, err := os.Stat(path)
	is.NoErr(err)
	is.Equal(info.Mode().Perm(), os.FileMode(0o600))

	is.NoErr(os.Chmod(path, 0o644))
	_, _, err = secret.LoadOrCreate(path)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "may be read by others"))

	is.NoErr(os.Chmod(path, 0o600))
	is.NoErr(os.WriteFile(path, []byte("not a key\n"), 0o600))
	_, err = secret.Load(path)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), "does not hold a key"))
}

func TestLast4(t *testing.T) {
	is := is.New(t)
	is.Equal(secret.Last4("abcdefgh1234"), "…1234")
	is.Equal(secret.Last4("abcd"), "…")
}

func TestSubjectKeyIsDerivedNotTheKeyItself(t *testing.T) {
	is := is.New(t)
	key := make([]byte, secret.KeySize)
	for i := range key {
		key[i] = byte(i)
	}
	box, err := secret.New(key)
	is.NoErr(err)
	sub := box.SubjectKey()
	is.Equal(len(sub), 32)
	is.True(string(sub) != string(key)) // never the AES key

	again, err := secret.New(key)
	is.NoErr(err)
	is.Equal(again.SubjectKey(), sub) // the same key file gives every replica the same

	key[0] ^= 1
	other, err := secret.New(key)
	is.NoErr(err)
	is.True(string(other.SubjectKey()) != string(sub))

	sub[0] ^= 1 // a copy: changing it changes nothing of the box's
	is.True(string(box.SubjectKey()) != string(sub))
}
