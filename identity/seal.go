package identity

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/skep-cd/skep/wire"
)

// sealer encrypts and authenticates what the controller hands out or
// stores but must not let anyone read or change: the sign-in's flow
// cookie, and the provider's tokens in a stored session. It is AES-256-GCM
// under a key derived from the session key, and safe for concurrent use.
type sealer struct{ aead cipher.AEAD }

// newSealer derives the key from secret, or makes a random one when
// secret is empty.
func newSealer(secret wire.Token) (*sealer, error) {
	ikm := []byte(secret.Reveal())
	if len(ikm) == 0 {
		ikm = make([]byte, 32)
		_, _ = rand.Read(ikm) // crypto/rand never fails (Go 1.24)
	}
	key, err := hkdf.Key(sha256.New, ikm, nil, "skep identity seal v1", 32)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// seal encrypts plain; purpose binds it to one use (a flow cookie, one
// session's row), so that a sealed value cannot pass for another.
func (s *sealer) seal(plain []byte, purpose string) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, []byte(purpose))
}

// errUnsealed is open's error: the value was not sealed for purpose by
// this key, or was changed.
var errUnsealed = errors.New("not sealed by this controller's session key")

// open decrypts what seal returned for purpose.
func (s *sealer) open(sealed []byte, purpose string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errUnsealed
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(purpose))
	if err != nil {
		return nil, errUnsealed
	}
	return plain, nil
}
