package sops

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// mapping is one mapping of a document, in file order: the order is part
// of the MAC.
type mapping []item

type item struct {
	key   string
	value any // string, int, float64, bool, time.Time, nil, []any or mapping
}

// comment is a value the file marks as a comment; it is dropped.
type comment struct{}

// maxDepth bounds the nesting of a document, against inputs built to
// exhaust the stack.
const maxDepth = 100

// rules says which values of a file are encrypted: the one crypt rule of
// its metadata (sops allows at most one).
type rules struct {
	unencryptedSuffix string
	encryptedSuffix   string
	unencryptedRegex  *regexp.Regexp
	encryptedRegex    *regexp.Regexp
}

// defaultRules are sops's when a file names none.
var defaultRules = rules{unencryptedSuffix: "_unencrypted"}

// encrypted reports whether the value at path is encrypted, as sops decides
// it: by the keys on the path, never by the value.
func (r rules) encrypted(path []string) bool {
	anyKey := func(match func(string) bool) bool {
		for _, k := range path {
			if match(k) {
				return true
			}
		}
		return false
	}
	switch {
	case r.unencryptedSuffix != "":
		return !anyKey(func(k string) bool { return strings.HasSuffix(k, r.unencryptedSuffix) })
	case r.encryptedSuffix != "":
		return anyKey(func(k string) bool { return strings.HasSuffix(k, r.encryptedSuffix) })
	case r.unencryptedRegex != nil:
		return !anyKey(r.unencryptedRegex.MatchString)
	case r.encryptedRegex != nil:
		return anyKey(r.encryptedRegex.MatchString)
	}
	return true
}

// macOnlyEncryptedInit starts the MAC of a file with mac_only_encrypted, so
// that it differs from the MAC over every value (sops's constant).
var macOnlyEncryptedInit = []byte{0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0xb, 0xb, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69}

// walker decrypts (or encrypts) every value of a document in file order,
// hashing the plaintexts into the MAC as it goes.
type walker struct {
	key     []byte
	rules   rules
	macOnly bool
	encrypt bool
	mac     hash.Hash
	values  []string // decrypted values, for Plaintext.Values
	seal    bool     // stand encrypted values in (Sealed); no key, no MAC
}

func newWalker(key []byte, r rules, macOnly, encrypt bool) *walker {
	w := &walker{key: key, rules: r, macOnly: macOnly, encrypt: encrypt, mac: sha512.New()}
	if macOnly {
		w.mac.Write(macOnlyEncryptedInit)
	}
	return w
}

// mapping walks m, whose keys extend path. The result is a new mapping.
func (w *walker) mapping(m mapping, path []string, depth int) (mapping, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	out := make(mapping, 0, len(m))
	for _, it := range m {
		// A fresh slice per key: the path must not share a backing array
		// with a sibling's.
		p := append(path[:len(path):len(path)], it.key)
		v, err := w.value(it.value, p, depth+1)
		if err != nil {
			return nil, err
		}
		if _, drop := v.(comment); drop {
			continue
		}
		out = append(out, item{key: it.key, value: v})
	}
	return out, nil
}

// value walks one value. The items of a list share their list's path, as
// in sops.
func (w *walker) value(v any, path []string, depth int) (any, error) {
	switch v := v.(type) {
	case mapping:
		return w.mapping(v, path, depth)
	case []any:
		if depth > maxDepth {
			return nil, fmt.Errorf("nested deeper than %d", maxDepth)
		}
		out := make([]any, 0, len(v))
		for _, e := range v {
			e, err := w.value(e, path, depth+1)
			if err != nil {
				return nil, err
			}
			if _, drop := e.(comment); !drop {
				out = append(out, e)
			}
		}
		return out, nil
	case nil:
		// sops neither encrypts nor hashes a null.
		return nil, nil
	}
	switch {
	case w.seal:
		return w.sealLeaf(v, path)
	case w.encrypt:
		return w.encryptLeaf(v, path)
	}
	return w.decryptLeaf(v, path)
}

// pathData is the additional data a value is encrypted with: its keys
// joined by ":", with a final ":".
func pathData(path []string) string {
	return strings.Join(path, ":") + ":"
}

func (w *walker) decryptLeaf(v any, path []string) (any, error) {
	encrypted := w.rules.encrypted(path)
	plain := v
	if encrypted {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("value at %s: %w: stored in plain where the file's rules want it encrypted", pathData(path), ErrTampered)
		}
		var err error
		if plain, err = decryptValue(s, w.key, pathData(path)); err != nil {
			return nil, fmt.Errorf("value at %s: %w", pathData(path), err)
		}
		if _, drop := plain.(comment); drop {
			return plain, nil
		}
	}
	b, err := toBytes(plain)
	if err != nil {
		return nil, fmt.Errorf("value at %s: %w", pathData(path), err)
	}
	if encrypted && len(b) > 0 {
		w.values = append(w.values, string(b))
	}
	if encrypted || !w.macOnly {
		w.mac.Write(b)
	}
	return plain, nil
}

// sealLeaf stands in an encrypted value without opening it; an encrypted
// comment goes, as Decrypt drops it.
func (w *walker) sealLeaf(v any, path []string) (any, error) {
	if !w.rules.encrypted(path) {
		return v, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("value at %s: %w: stored in plain where the file's rules want it encrypted", pathData(path), ErrTampered)
	}
	if s == "" {
		return "", nil
	}
	if _, _, _, typ, err := parseValue(s); err != nil {
		return nil, fmt.Errorf("value at %s: %w", pathData(path), err)
	} else if typ == "comment" {
		return comment{}, nil
	}
	return sealedOf(s), nil
}

func (w *walker) encryptLeaf(v any, path []string) (any, error) {
	encrypted := w.rules.encrypted(path)
	b, err := toBytes(v)
	if err != nil {
		return nil, fmt.Errorf("value at %s: %w", pathData(path), err)
	}
	if encrypted || !w.macOnly {
		w.mac.Write(b)
	}
	if !encrypted {
		return v, nil
	}
	return encryptValue(v, w.key, pathData(path))
}

// sum is the MAC of the values walked so far, as sops writes it.
func (w *walker) sum() string {
	return fmt.Sprintf("%X", w.mac.Sum(nil))
}

// checkMAC compares the file's MAC, encrypted with the last-modified time
// as additional data, with the one over the values walked.
func (w *walker) checkMAC(stored, lastModified string) error {
	got, err := decryptValue(stored, w.key, lastModified)
	if err != nil {
		return fmt.Errorf("MAC: %w", err)
	}
	s, ok := got.(string)
	if !ok || subtle.ConstantTimeCompare([]byte(s), []byte(w.sum())) != 1 {
		return ErrTampered
	}
	return nil
}

// decryptValue opens one ENC[AES256_GCM,data:…,iv:…,tag:…,type:…] value.
// An empty value stays empty, as sops leaves it.
func decryptValue(s string, key []byte, additional string) (any, error) {
	if s == "" {
		return "", nil
	}
	data, iv, tag, typ, err := parseValue(s)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		return nil, fmt.Errorf("%w: bad nonce", ErrTampered)
	}
	plain, err := gcm.Open(nil, iv, append(data, tag...), []byte(additional))
	if err != nil {
		return nil, fmt.Errorf("%w: the value does not authenticate", ErrTampered)
	}
	text := string(plain)
	switch typ {
	case "str":
		return text, nil
	case "bytes":
		return plain, nil
	case "int":
		return strconv.Atoi(text)
	case "float":
		return strconv.ParseFloat(text, 64)
	case "bool":
		return strconv.ParseBool(text)
	case "time":
		var t time.Time
		if err := t.UnmarshalText(plain); err != nil {
			return nil, errors.New("encrypted time does not parse")
		}
		return t, nil
	case "comment":
		return comment{}, nil
	}
	return nil, fmt.Errorf("unknown value type %q", typ)
}

// parseValue splits an encrypted value into its parts.
func parseValue(s string) (data, iv, tag []byte, typ string, err error) {
	inner, ok := strings.CutPrefix(s, "ENC[AES256_GCM,")
	if ok {
		inner, ok = strings.CutSuffix(inner, "]")
	}
	parts := strings.Split(inner, ",")
	if !ok || len(parts) != 4 {
		return nil, nil, nil, "", fmt.Errorf("%w: not an ENC[AES256_GCM,…] value", ErrTampered)
	}
	field := func(i int, name string) ([]byte, error) {
		v, ok := strings.CutPrefix(parts[i], name+":")
		if !ok {
			return nil, fmt.Errorf("%w: no %s in the encrypted value", ErrTampered, name)
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is not base64", ErrTampered, name)
		}
		return b, nil
	}
	if data, err = field(0, "data"); err != nil {
		return
	}
	if iv, err = field(1, "iv"); err != nil {
		return
	}
	if tag, err = field(2, "tag"); err != nil {
		return
	}
	typ, ok = strings.CutPrefix(parts[3], "type:")
	if !ok || len(iv) == 0 || len(tag) != 16 {
		return nil, nil, nil, "", fmt.Errorf("%w: malformed encrypted value", ErrTampered)
	}
	return data, iv, tag, typ, nil
}

// encryptValue seals v as sops does: a random 32-byte nonce, the path as
// additional data, the type named in the clear.
func encryptValue(v any, key []byte, additional string) (string, error) {
	b, err := toBytes(v)
	if err != nil {
		return "", err
	}
	switch v.(type) {
	case string, []byte:
		if len(b) == 0 {
			return "", nil // sops leaves an empty value empty
		}
	}
	var typ string
	switch v.(type) {
	case string:
		typ = "str"
	case []byte:
		typ = "bytes"
	case int:
		typ = "int"
	case float64:
		typ = "float"
	case bool:
		typ = "bool"
	case time.Time:
		typ = "time"
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return "", err
	}
	iv := make([]byte, 32)
	if _, err := rand.Read(iv); err != nil {
		return "", err
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		return "", err
	}
	sealed := gcm.Seal(nil, iv, b, []byte(additional))
	n := len(sealed) - gcm.Overhead()
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("ENC[AES256_GCM,data:%s,iv:%s,tag:%s,type:%s]", enc(sealed[:n]), enc(iv), enc(sealed[n:]), typ), nil
}

// toBytes is the text of a value that the MAC covers, as sops writes it
// (booleans as True and False).
func toBytes(v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return []byte(v), nil
	case []byte:
		return v, nil
	case int:
		return []byte(strconv.Itoa(v)), nil
	case float64:
		return []byte(strconv.FormatFloat(v, 'f', -1, 64)), nil
	case bool:
		if v {
			return []byte("True"), nil
		}
		return []byte("False"), nil
	case time.Time:
		return v.MarshalText()
	}
	return nil, fmt.Errorf("a value of type %T cannot be encrypted", v)
}
