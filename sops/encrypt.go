package sops

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
)

// formatVersion is the sops release whose file format Encrypt writes.
const formatVersion = "3.13.3"

// Encrypt encrypts plaintext, the content of a file called name (whose
// extension selects the format), to the age recipients ("age1…"), as
// `sops --encrypt --age R1,R2 name` does with its default rule: every value
// encrypted except under keys ending in _unencrypted. It is for tests and
// fixtures; Skep itself only decrypts. Comments are dropped.
func Encrypt(name string, plaintext []byte, recipients ...string) ([]byte, error) {
	format := FormatOf(name)
	if format == INI {
		return nil, fmt.Errorf("SOPS INI files are %w", ErrUnsupported)
	}
	if len(recipients) == 0 {
		return nil, errors.New("no age recipient")
	}
	var doc document
	var err error
	if format == Binary {
		doc = document{branches: []mapping{{{key: "data", value: string(plaintext)}}}}
	} else if doc, err = parse(format, plaintext); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if doc.meta != nil {
		return nil, fmt.Errorf("%s is already encrypted", name)
	}
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, err
	}
	var stanzas []any
	for _, r := range recipients {
		enc, err := encryptDataKey(dataKey, r)
		if err != nil {
			return nil, err
		}
		stanzas = append(stanzas, map[string]any{"recipient": r, "enc": enc})
	}
	w := newWalker(dataKey, defaultRules, false, true)
	for i, branch := range doc.branches {
		if doc.branches[i], err = w.mapping(branch, nil, 0); err != nil {
			return nil, err
		}
	}
	lastModified := time.Now().UTC().Format(time.RFC3339)
	mac, err := encryptValue(w.sum(), dataKey, lastModified)
	if err != nil {
		return nil, err
	}
	meta := map[string]any{
		"age":                stanzas,
		"lastmodified":       lastModified,
		"mac":                mac,
		"unencrypted_suffix": defaultRules.unencryptedSuffix,
		"version":            formatVersion,
	}
	switch format {
	case Dotenv:
		var flat mapping
		for _, it := range fromGo(meta).(mapping) {
			flatten(metadataPrefix+it.key, toGo(it.value), &flat)
		}
		doc.branches[0] = append(doc.branches[0], flat...)
		return emitDotenv(doc.branches)
	case YAML:
		for i := range doc.branches {
			doc.branches[i] = append(doc.branches[i], item{key: metadataKey, value: fromGo(meta)})
		}
		return emitYAML(doc.branches)
	default: // JSON and Binary
		out, err := emitJSON(append(doc.branches[0], item{key: metadataKey, value: fromGo(meta)}), "\t")
		if err != nil {
			return nil, err
		}
		return append(out, '\n'), nil
	}
}

// encryptDataKey encrypts the data key to one recipient, armored, as sops
// stores it.
func encryptDataKey(key []byte, recipient string) (string, error) {
	rs, err := age.ParseRecipients(strings.NewReader(recipient))
	if err != nil || len(rs) != 1 {
		return "", fmt.Errorf("recipient %q is not an age recipient", recipient)
	}
	var b bytes.Buffer
	aw := armor.NewWriter(&b)
	w, err := age.Encrypt(aw, rs[0])
	if err != nil {
		return "", err
	}
	if _, err := w.Write(key); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := aw.Close(); err != nil {
		return "", err
	}
	return b.String() + "\n", nil
}
