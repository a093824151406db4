package webhook

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"strings"
)

// KeyBytes is the length of a sealing key.
const KeyBytes = 32

// Box seals signing secrets for storage with AES-256-GCM under a key the operator holds
// (WEBHOOK_SECRET_KEY): the service must sign with a secret, so it cannot keep only a hash
// of it, and a copy of the database alone signs nothing.
type Box struct{ aead cipher.AEAD }

// ParseKey reads a sealing key: the base64 of KeyBytes random bytes.
func ParseKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(k) != KeyBytes {
		return nil, errors.New("webhook: a sealing key is the base64 of 32 random bytes (openssl rand -base64 32)")
	}
	return k, nil
}

// NewKey returns a fresh sealing key, base64.
func NewKey() (string, error) {
	k := make([]byte, KeyBytes)
	if _, err := rand.Read(k); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(k), nil
}

// KeyFile reads the sealing key kept in the file at path, making it there (mode 0600) the
// first time: for a development setup, where every process on the machine shares it.
func KeyFile(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	key, err := NewKey()
	if err != nil {
		return "", err
	}
	return key, os.WriteFile(path, []byte(key+"\n"), 0o600)
}

// NewBox returns a box sealing with key.
func NewBox(key []byte) (*Box, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts a secret: base64 of a random nonce and the ciphertext.
func (b *Box) Seal(secret string) (string, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(secret)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b.aead.Seal(nonce, nonce, []byte(secret), nil)), nil
}

// ErrSealed means a sealed secret does not open with this key.
var ErrSealed = errors.New("webhook: the secret does not open with this key (WEBHOOK_SECRET_KEY changed?)")

// Open decrypts what Seal made.
func (b *Box) Open(sealed string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	n := b.aead.NonceSize()
	if err != nil || len(raw) < n {
		return "", ErrSealed
	}
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], nil)
	if err != nil {
		return "", ErrSealed
	}
	return string(plain), nil
}
