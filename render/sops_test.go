package render

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/skep-cd/skep/sops"
)

// newKeys makes a fresh age identity: the keys to decrypt with, and the
// recipient to encrypt to.
func newKeys(t *testing.T) (*sops.Keys, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := sops.ParseKeys(strings.NewReader(id.String()))
	if err != nil {
		t.Fatal(err)
	}
	return keys, id.Recipient().String()
}

// writeRepo writes files (plain, or encrypted to recipient when the name
// is in encrypt) into a new directory.
func writeRepo(t *testing.T, recipient string, files map[string]string, encrypt ...string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		data := []byte(content)
		if slices.Contains(encrypt, name) {
			var err error
			if data, err = sops.Encrypt(name, data, recipient); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const sopsCompose = `services:
  web:
    image: web:1
    env_file: app.enc.env
    environment:
      DSN: postgres://app:${DB_PASSWORD}@db/app
    secrets: [db]
secrets:
  db:
    file: ./db.enc.yaml
`

func TestComposeDecryptsSopsSecretsEnvFilesAndVariables(t *testing.T) {
	keys, recipient := newKeys(t)
	dir := writeRepo(t, recipient, map[string]string{
		"compose.yaml": sopsCompose,
		".env":         "DB_PASSWORD=pw-from-dotenv\n",
		"app.enc.env":  "API_TOKEN=tok-from-env-file\nPUBLIC_unencrypted=shown\n",
		"db.enc.yaml":  "password: pw-in-secret\n",
	}, ".env", "app.enc.env", "db.enc.yaml")

	doc, err := Compose(t.Context(), Input{Root: dir, Keys: keys})
	if err != nil {
		t.Fatalf("Compose = %v", err)
	}
	if got := string(doc.Files["db.enc.yaml"]); got != "password: pw-in-secret\n" {
		t.Errorf("secret file = %q, want the decrypted document", got)
	}
	env := doc.Config.Services[0].Environment
	for k, want := range map[string]string{"DSN": "postgres://app:pw-from-dotenv@db/app", "API_TOKEN": "tok-from-env-file", "PUBLIC_unencrypted": "shown"} {
		if v := env[k]; v == nil || *v != want {
			t.Errorf("environment %s = %v, want %q", k, v, want)
		}
	}
	// The secret's content is only in Files, which are digested whole;
	// the env values may sit anywhere and must be masked.
	slices.Sort(doc.Sensitive)
	if want := []string{"pw-from-dotenv", "tok-from-env-file"}; !slices.Equal(doc.Sensitive, want) {
		t.Errorf("Sensitive = %q, want %q", doc.Sensitive, want)
	}
}

func TestComposeRefusesSopsFilesItCannotTrustNamingTheFile(t *testing.T) {
	keys, recipient := newKeys(t)
	otherKeys, _ := newKeys(t)
	files := map[string]string{
		"compose.yaml": sopsCompose,
		".env":         "DB_PASSWORD=pw\n",
		"app.enc.env":  "API_TOKEN=tok-plain-text\n",
		"db.enc.yaml":  "password: pw-in-secret\n",
	}
	dir := writeRepo(t, recipient, files, "app.enc.env", "db.enc.yaml")
	tampered := writeRepo(t, recipient, files, "app.enc.env", "db.enc.yaml")
	data, err := os.ReadFile(filepath.Join(tampered, "db.enc.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The file's own values stay; the MAC no longer covers the file.
	if err := os.WriteFile(filepath.Join(tampered, "db.enc.yaml"), append([]byte("added_unencrypted: x\n"), data...), 0o600); err != nil {
		t.Fatal(err)
	}
	config := writeRepo(t, recipient, map[string]string{
		"compose.yaml": "services:\n  web:\n    image: web:1\n    configs: [c]\nconfigs:\n  c:\n    file: ./c.enc.json\n",
		"c.enc.json":   `{"k": "v-secret"}`,
	}, "c.enc.json")
	encryptedCompose := writeRepo(t, recipient, map[string]string{"compose.yaml": "services:\n  web:\n    image: web:1\n"}, "compose.yaml")

	tests := []struct {
		name  string
		in    Input
		want  error  // nil: only the message is checked
		file  string // the error must name it
		words string
	}{
		{"no identity", Input{Root: dir}, sops.ErrNoIdentity, "app.enc.env", recipient},
		{"an identity that is not a recipient", Input{Root: dir, Keys: otherKeys}, sops.ErrNotRecipient, "app.enc.env", recipient},
		{"a tampered secret file", Input{Root: tampered, Keys: keys}, sops.ErrTampered, "db.enc.yaml", "secrets.db.file"},
		{"an encrypted config", Input{Root: config, Keys: keys}, nil, "c.enc.json", "declare it as a secret"},
		{"an encrypted compose file", Input{Root: encryptedCompose, Keys: keys}, nil, "compose.yaml", "keep the compose file plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Compose(t.Context(), tt.in)
			if err == nil {
				t.Fatalf("Compose = %v, want an error", doc)
			}
			var re *Error
			if !errors.As(err, &re) {
				t.Errorf("Compose error %v is no *Error", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Compose error = %v, want %v", err, tt.want)
			}
			for _, s := range []string{tt.file, tt.words} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
			for _, s := range []string{"tok-plain-text", "pw-in-secret", "v-secret"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q holds plaintext %q", err, s)
				}
			}
		})
	}
}

// A refused value is quoted in the message (here an image reference); one
// interpolated from an encrypted env file must not reach it.
func TestComposeMasksDecryptedValuesInErrors(t *testing.T) {
	keys, recipient := newKeys(t)
	dir := writeRepo(t, recipient, map[string]string{
		"compose.yaml": "services:\n  web:\n    image: \"web:${SECRET_TAG}\"\n",
		".env":         "SECRET_TAG=Not A Tag s3cr3t\n",
	}, ".env")
	_, err := Compose(t.Context(), Input{Root: dir, Keys: keys})
	if err == nil {
		t.Fatal("Compose accepted an invalid image")
	}
	if strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), sops.Mask("Not A Tag s3cr3t", []string{"Not A Tag s3cr3t"})) {
		t.Errorf("error = %q; want the value masked", err)
	}
}

func TestComposeMaskedDocumentHoldsMasksOnlyWhereDecryptedValuesWent(t *testing.T) {
	keys, recipient := newKeys(t)
	m := sops.MaskOf("1")
	files := map[string]string{
		"compose.yaml": `services:
  web:
    image: nginx:1.27
    env_file: [app.enc.env, plain.env]
    environment: {REV: "${REV}", PINNED: "${PINNED}", OVERRIDDEN: "mine", TAG: "v${REV}"}
`,
		".env":        "REV=1\nPINNED=1\nBARE=1\n",
		"app.enc.env": "TOKEN=1\nOVERRIDDEN=1\nLATER=1\n",
		"plain.env":   "LATER=1\nPLAIN=1\nBARE\n",
	}
	dir := writeRepo(t, recipient, files, ".env", "app.enc.env")
	doc, err := Compose(t.Context(), Input{Root: dir, Keys: keys, Variables: map[string]string{"PINNED": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Masked == nil {
		t.Fatal("Masked = nil, want the masked document")
	}
	svc := doc.Masked.Services[0]
	want := map[string]string{
		"REV":        m,       // an encrypted variable
		"TAG":        "v" + m, // interpolated from one
		"TOKEN":      m,       // an encrypted env file's entry
		"PINNED":     "1",     // the app set's variable wins over the encrypted one
		"OVERRIDDEN": "mine",  // the service's own environment wins
		"LATER":      "1",     // a later plain env file wins
		"PLAIN":      "1",     // a plain env file's entry
	}
	for k, v := range want {
		if got := svc.Environment[k]; got == nil || *got != v {
			t.Errorf("masked environment %s = %v, want %q", k, got, v)
		}
	}
	if svc.Image != "nginx:1.27" {
		t.Errorf("masked image = %q, want nginx:1.27", svc.Image)
	}
	if got := doc.Config.Services[0].Environment["TAG"]; got == nil || *got != "v1" {
		t.Errorf("plain environment TAG = %v, want v1", got)
	}

	// A decrypted value where the schema wants a number cannot be masked
	// there: no masked document, and whoever shows the specs masks by text.
	files["compose.yaml"] = "services:\n  web:\n    image: nginx:1.27\n    deploy: {replicas: \"${REV}\"}\n"
	dir = writeRepo(t, recipient, files, ".env", "app.enc.env")
	doc, err = Compose(t.Context(), Input{Root: dir, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Masked != nil || len(doc.Sensitive) == 0 {
		t.Errorf("Masked = %v, Sensitive = %q; want nil and the values", doc.Masked, doc.Sensitive)
	}
}
