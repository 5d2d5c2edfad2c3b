// Package sops decrypts files kept in git encrypted with SOPS to age
// recipients, in memory, with the controller's age identities.
//
// It reads the SOPS file format itself (the `sops` metadata, the data key
// encrypted to each age recipient, AES-256-GCM per value with the value's
// path as additional data, and the MAC over every value) for the YAML,
// JSON, dotenv and binary stores, chosen from the file's name as the sops
// tool chooses them. The SOPS project's own packages are not used: they link
// every cloud KMS SDK into the binary (see docs/design/sops.md).
//
// It never writes a file, never logs, and never puts a decrypted value in an
// error: errors name paths inside the document and recipients, which SOPS
// keeps in plain anyway. A file whose MAC does not match, or none of whose
// recipients is ours, is an error, never a partial result. Plaintext and
// Keys redact themselves in every string form.
//
// Encrypt is the inverse of Decrypt, for tests and fixtures: Skep itself
// only decrypts.
package sops

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
)

// Format is how a SOPS file stores its values: the store the sops tool
// picks from the file's extension.
type Format string

const (
	// YAML is a file ending in .yaml or .yml: every scalar is encrypted.
	YAML Format = "yaml"
	// JSON is a file ending in .json.
	JSON Format = "json"
	// Dotenv is a file ending in .env: KEY=VALUE lines.
	Dotenv Format = "dotenv"
	// INI is a file ending in .ini; it is recognised but not supported.
	INI Format = "ini"
	// Binary is any other file: the whole content is one encrypted value,
	// stored in a JSON document under "data".
	Binary Format = "binary"
)

// FormatOf returns the format the sops tool would use for a file called
// name (a slash or OS path; only its extension counts).
func FormatOf(name string) Format {
	switch strings.ToLower(path.Ext(strings.ReplaceAll(name, `\`, "/"))) {
	case ".yaml", ".yml":
		return YAML
	case ".json":
		return JSON
	case ".env":
		return Dotenv
	case ".ini":
		return INI
	}
	return Binary
}

// Errors Decrypt returns, wrapped; test them with errors.Is.
var (
	// ErrNoIdentity: the file is encrypted and there are no keys to open it.
	ErrNoIdentity = errors.New("no age identity to decrypt with")
	// ErrNotRecipient: none of the keys is a recipient of the file.
	ErrNotRecipient = errors.New("none of the age identities is a recipient of the file")
	// ErrTampered: a value or the MAC does not authenticate, or the MAC
	// does not match the values: the file changed after it was encrypted.
	ErrTampered = errors.New("the file was changed after it was encrypted (MAC mismatch)")
	// ErrUnsupported: valid SOPS, but a feature Skep does not read (INI,
	// Shamir key groups, comment rules).
	ErrUnsupported = errors.New("not supported")
)

// MaxKeysFile bounds the identity file LoadKeys reads.
const MaxKeysFile = 1 << 20

// Keys are the age identities a controller decrypts with. A nil *Keys
// decrypts nothing (ErrNoIdentity). Keys are immutable and safe for
// concurrent use; no method reveals a private key.
type Keys struct {
	identities []age.Identity
	recipients []string // the public keys of identities, where age knows them
	sealed     bool     // Sealed: open nothing, stand values in
}

// Sealed returns keys that open no file: Decrypt checks a file's form and
// stands each encrypted value in by "sealed:" and a digest of its
// ciphertext, without a data key, a MAC check or an identity. A render
// with them shows that a file's encrypted values changed (their
// ciphertext did) and never what they are; the plan of a pull request from
// a fork is made so, since the controller's identities must not open what
// a stranger wrote. Plaintext.Values is empty: a stand-in is no secret.
func Sealed() *Keys { return &Keys{sealed: true} }

// LoadKeys reads an age identity file: one or more AGE-SECRET-KEY-… lines
// (X25519 or hybrid), as age-keygen writes it; empty lines and lines
// starting with # are skipped. Errors name the file, never its content.
func LoadKeys(file string) (*Keys, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("age identity: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxKeysFile+1))
	if err != nil {
		return nil, fmt.Errorf("age identity %s: %w", file, err)
	}
	if len(data) > MaxKeysFile {
		return nil, fmt.Errorf("age identity %s: larger than %d bytes", file, MaxKeysFile)
	}
	keys, err := ParseKeys(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("age identity %s: %w", file, err)
	}
	return keys, nil
}

// ParseKeys reads age identities in the format of LoadKeys from r.
func ParseKeys(r io.Reader) (*Keys, error) {
	// age's own parser echoes a malformed line in its error: count the
	// line here and let no text of the file reach the message.
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxKeysFile)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, errors.New("unreadable identity file")
	}
	k := &Keys{}
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ids, err := age.ParseIdentities(strings.NewReader(line))
		if err != nil || len(ids) != 1 {
			return nil, fmt.Errorf("line %d: not an age identity (want AGE-SECRET-KEY-…, as age-keygen writes)", i+1)
		}
		k.identities = append(k.identities, ids[0])
		switch id := ids[0].(type) {
		case *age.X25519Identity:
			k.recipients = append(k.recipients, id.Recipient().String())
		case *age.HybridIdentity:
			k.recipients = append(k.recipients, id.Recipient().String())
		}
	}
	if len(k.identities) == 0 {
		return nil, errors.New("no age identity in the file")
	}
	return k, nil
}

// Recipients returns the public keys of k's identities, which files must
// be encrypted to; a new slice the caller owns.
func (k *Keys) Recipients() []string {
	if k == nil {
		return nil
	}
	return slices.Clone(k.recipients)
}

// String names the recipients only.
func (k *Keys) String() string {
	if k != nil && k.sealed {
		return "sealed: no age identity"
	}
	return fmt.Sprintf("age identities for %s", strings.Join(k.Recipients(), ", "))
}

// LogValue logs the recipients only.
func (k *Keys) LogValue() slog.Value {
	return slog.StringValue(k.String())
}

// Plaintext is a decrypted SOPS file. It is held in memory only; its
// String, Format and LogValue print no value.
type Plaintext struct {
	// Data is the file as `sops --decrypt` prints it, without comments: the
	// document without its metadata in the same format, or for a binary
	// file the bytes that were encrypted.
	Data []byte
	// Values are the values that were encrypted, in file order, as text
	// (empty ones left out); values the file's rules keep in plain are not
	// listed. Callers mask them wherever they show what the file became.
	Values []string
}

// String hides the content.
func (p Plaintext) String() string {
	return fmt.Sprintf("sops.Plaintext(%d bytes, redacted)", len(p.Data))
}

// Format hides the content from every verb, %#v included.
func (p Plaintext) Format(f fmt.State, _ rune) {
	io.WriteString(f, p.String())
}

// LogValue hides the content.
func (p Plaintext) LogValue() slog.Value {
	return slog.StringValue(p.String())
}

// Encrypted reports whether data, read from a file called name, is a SOPS
// document of the format that name implies: it carries the SOPS metadata
// with a MAC. It decrypts nothing and needs no key.
func Encrypted(name string, data []byte) bool {
	switch f := FormatOf(name); f {
	case INI:
		for _, line := range strings.Split(string(data), "\n") {
			if strings.TrimSpace(line) == "[sops]" {
				return true
			}
		}
		return false
	case Dotenv:
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "sops_mac=") {
				return true
			}
		}
		return false
	default:
		doc, err := parse(f, data)
		if err != nil || doc.meta == nil {
			return false
		}
		_, ok := doc.meta["mac"]
		return ok
	}
}

// Decrypt decrypts data, the content of a SOPS file called name (whose
// extension selects the format), with k's identities. It checks every
// value's authentication and the file's MAC before it returns anything.
// Errors wrap ErrNoIdentity, ErrNotRecipient, ErrTampered or
// ErrUnsupported where those apply, and never hold a decrypted value. It is
// safe to call concurrently.
func (k *Keys) Decrypt(name string, data []byte) (Plaintext, error) {
	format := FormatOf(name)
	if format == INI {
		return Plaintext{}, fmt.Errorf("SOPS INI files are %w; use YAML, JSON, dotenv or binary", ErrUnsupported)
	}
	doc, err := parse(format, data)
	if err != nil {
		return Plaintext{}, fmt.Errorf("not a SOPS %s file: %w", format, err)
	}
	if doc.meta == nil {
		return Plaintext{}, fmt.Errorf("not a SOPS %s file: no sops metadata", format)
	}
	meta, err := parseMetadata(doc.meta)
	if err != nil {
		return Plaintext{}, fmt.Errorf("SOPS metadata: %w", err)
	}
	if k == nil {
		return Plaintext{}, fmt.Errorf("%w (the file is encrypted for %s)", ErrNoIdentity, meta.describeRecipients())
	}
	if k.sealed {
		return seal(format, doc, meta)
	}
	dataKey, err := k.dataKey(meta)
	if err != nil {
		return Plaintext{}, err
	}
	w := newWalker(dataKey, meta.rules, meta.macOnlyEncrypted, false)
	for i, branch := range doc.branches {
		if doc.branches[i], err = w.mapping(branch, nil, 0); err != nil {
			return Plaintext{}, err
		}
	}
	if err := w.checkMAC(meta.mac, meta.lastModified); err != nil {
		return Plaintext{}, err
	}
	out, err := emit(format, doc.branches)
	if err != nil {
		return Plaintext{}, err
	}
	return Plaintext{Data: out, Values: w.values}, nil
}

// dataKey opens the file's data key with the first age stanza one of k's
// identities opens.
func (k *Keys) dataKey(meta metadata) ([]byte, error) {
	if len(meta.age) == 0 {
		return nil, fmt.Errorf("%w: the file has no age recipient (it is encrypted for %s)", ErrNotRecipient, meta.describeRecipients())
	}
	var malformed error
	for _, stanza := range meta.age {
		r, err := age.Decrypt(armor.NewReader(strings.NewReader(strings.TrimSpace(stanza.enc)+"\n")), k.identities...)
		if err != nil {
			var none *age.NoIdentityMatchError
			if !errors.As(err, &none) && malformed == nil {
				malformed = fmt.Errorf("age stanza of %s: %w", stanza.recipient, err)
			}
			continue
		}
		key, err := io.ReadAll(io.LimitReader(r, 64))
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("age stanza of %s: %w: the data key does not authenticate or is not 32 bytes", stanza.recipient, ErrTampered)
		}
		return key, nil
	}
	if malformed != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRecipient, malformed)
	}
	return nil, fmt.Errorf("%w: the file is encrypted for %s, the identities are for %s",
		ErrNotRecipient, meta.describeRecipients(), strings.Join(k.recipients, ", "))
}

// seal is Decrypt with Sealed keys: each value the file's rules encrypt is
// replaced by its stand-in, the rest is kept as it is.
func seal(format Format, doc document, meta metadata) (Plaintext, error) {
	w := &walker{rules: meta.rules, seal: true}
	for i, branch := range doc.branches {
		var err error
		if doc.branches[i], err = w.mapping(branch, nil, 0); err != nil {
			return Plaintext{}, err
		}
	}
	out, err := emit(format, doc.branches)
	if err != nil {
		return Plaintext{}, err
	}
	return Plaintext{Data: out}, nil
}

// SealedPrefix starts every stand-in of a Sealed render.
const SealedPrefix = "sealed:"

// sealedOf is the stand-in of one encrypted value: a digest of its
// ciphertext, which changes when the value is encrypted anew.
func sealedOf(ciphertext string) string {
	sum := sha256.Sum256([]byte(ciphertext))
	return SealedPrefix + hex.EncodeToString(sum[:8])
}
