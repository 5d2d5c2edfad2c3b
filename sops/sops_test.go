package sops

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recipient is testdata/age.key's public key.
const recipient = "age1jjflzzrnae3twvlgu2s9jvt6t4k8tu4f6p40jdz0937l704wucrs9n0ttw"

func loadKeys(t *testing.T, name string) *Keys {
	t.Helper()
	k, err := LoadKeys(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// withoutComments drops the "#" lines sops -d prints and Decrypt does not.
func withoutComments(data []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// The encrypted files were made by the sops tool itself (testdata/README.md):
// Decrypt must print what `sops -d` printed, and list the encrypted values.
func TestDecryptReadsFilesTheSopsToolEncrypted(t *testing.T) {
	keys := loadKeys(t, "age.key")
	tests := []struct {
		name, file, want string
		values           []string
	}{
		{"yaml with every scalar type and two documents", "secrets.enc.yaml", "secrets.dec.yaml",
			[]string{"app", "s3cr3t: with colon", "5432", "0.75", "True", "db-1.internal", "db-2.internal", "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n", "document"}},
		{"json keeps key order and number types", "secrets.enc.json", "secrets.dec.json",
			[]string{"tok-9f8e7d6c", "3", "2.5", "False", "read", "write"}},
		{"dotenv with escaped newlines and an unencrypted key", "app.enc.env", "app.dec.env",
			[]string{"hunter2-env", "key with spaces=and equals", "line one\nline two"}},
		{"binary gives the bytes back", "blob.bin.enc", "blob.bin",
			[]string{"raw-secret-bytes\nline two\n\x00\x01\xfe binary tail"}},
		{"encrypted_regex with mac_only_encrypted", "rules.enc.yaml", "rules.dec.yaml",
			[]string{"only-this-is-secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := keys.Decrypt(tt.file, readTestdata(t, tt.file))
			if err != nil {
				t.Fatalf("Decrypt(%s): %v", tt.file, err)
			}
			want := readTestdata(t, tt.want)
			if !strings.HasSuffix(tt.want, ".bin") {
				want = withoutComments(want)
			}
			if diff := cmp.Diff(string(want), string(got.Data)); diff != "" {
				t.Errorf("Decrypt(%s) differs from sops -d (-want +got):\n%s", tt.file, diff)
			}
			if diff := cmp.Diff(tt.values, got.Values); diff != "" {
				t.Errorf("Decrypt(%s).Values (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

func TestDecryptOpensAFileWithAnyOfItsRecipients(t *testing.T) {
	data := readTestdata(t, "shared.enc.env")
	for _, key := range []string{"age.key", "other.key"} {
		got, err := loadKeys(t, key).Decrypt("shared.enc.env", data)
		if err != nil {
			t.Fatalf("Decrypt with %s: %v", key, err)
		}
		if string(got.Data) != "TOKEN=two-recipients\n" {
			t.Errorf("Decrypt with %s = %q", key, got.Data)
		}
	}
}

// replaceOnce returns data with the first old replaced, failing when there
// is none, so a refusal test cannot pass on an unchanged file.
func replaceOnce(t *testing.T, data []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("fixture holds no %q", old)
	}
	return bytes.Replace(data, []byte(old), []byte(new), 1)
}

func TestDecryptRefusesWhatItCannotTrust(t *testing.T) {
	yamlFile := readTestdata(t, "secrets.enc.yaml")
	envFile := readTestdata(t, "app.enc.env")
	lines := strings.Split(string(yamlFile), "\n")
	valueOf := func(prefix string) string {
		for _, l := range lines {
			if v, ok := strings.CutPrefix(l, prefix); ok {
				return v
			}
		}
		t.Fatalf("no line %q", prefix)
		return ""
	}
	user, password := valueOf("    user: "), valueOf("    password: ")
	tests := []struct {
		name    string
		keys    *Keys
		file    string
		data    []byte
		want    error
		mention string // the error must say this
	}{
		{name: "a key that is not a recipient", keys: loadKeys(t, "other.key"), file: "secrets.enc.yaml", data: yamlFile,
			want: ErrNotRecipient, mention: recipient},
		{name: "no key at all", keys: nil, file: "secrets.enc.yaml", data: yamlFile,
			want: ErrNoIdentity, mention: recipient},
		{name: "a changed ciphertext", file: "secrets.enc.yaml",
			data: replaceOnce(t, yamlFile, "data:aslI", "data:aslJ"), want: ErrTampered, mention: "database:user:"},
		{name: "two values swapped between keys", file: "secrets.enc.yaml",
			data: []byte(strings.Replace(strings.Replace(string(yamlFile), user, "SWAP", 1), password, user, 1)), want: ErrTampered},
		{name: "a value left in plain is changed", file: "secrets.enc.yaml",
			data: replaceOnce(t, yamlFile, "region_unencrypted: eu-west-1", "region_unencrypted: eu-west-2"), want: ErrTampered},
		{name: "a value is removed", file: "app.enc.env",
			data: []byte(strings.Join(slices.DeleteFunc(strings.Split(string(envFile), "\n"), func(l string) bool { return strings.HasPrefix(l, "API_KEY=") }), "\n")),
			want: ErrTampered},
		{name: "a value is added in plain", file: "app.enc.env",
			data: append([]byte("EXTRA_unencrypted=1\n"), envFile...), want: ErrTampered},
		{name: "the MAC is removed", file: "app.enc.env",
			data: []byte(strings.Join(slices.DeleteFunc(strings.Split(string(envFile), "\n"), func(l string) bool { return strings.HasPrefix(l, "sops_mac=") }), "\n")),
			want: ErrTampered},
		{name: "the time the MAC is bound to is changed", file: "app.enc.env",
			data: replaceOnce(t, envFile, "sops_lastmodified=2026-12-01T00:04:57Z", "sops_lastmodified=2026-12-01T00:04:58Z"), want: ErrTampered},
		{name: "an INI file", file: "x.ini", data: []byte("[sops]\nmac=x\n"), want: ErrUnsupported},
		{name: "Shamir key groups", file: "x.yaml",
			data: []byte("a: ENC[x]\nsops:\n  key_groups: [{age: []}, {age: []}]\n  lastmodified: \"2024-01-01T00:00:00Z\"\n  mac: x\n"), want: ErrUnsupported},
	}
	secrets := []string{"app", "s3cr3t", "hunter2", "key with spaces", "fake"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := tt.keys
			if keys == nil && tt.want != ErrNoIdentity {
				keys = loadKeys(t, "age.key")
			}
			got, err := keys.Decrypt(tt.file, tt.data)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decrypt = %v, %v; want %v", got, err, tt.want)
			}
			if got.Data != nil || got.Values != nil {
				t.Errorf("Decrypt returned plaintext with the error %v", err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) && !strings.Contains(tt.mention, s) {
					t.Errorf("error %q holds the plaintext %q", err, s)
				}
			}
		})
	}
}

func TestEncryptRoundTrip(t *testing.T) {
	keys := loadKeys(t, "age.key")
	tests := []struct {
		name, file string
		plain      string
		values     []string
	}{
		{"yaml", "db.yaml", "user: app\npassword: hunter2\nport: 5432\nflags:\n    - a\n    - b\nnote_unencrypted: plain\n", []string{"app", "hunter2", "5432", "a", "b"}},
		{"json", "db.json", "{\n\t\"token\": \"t0k\",\n\t\"n\": 1.5,\n\t\"ok\": true\n}\n", []string{"t0k", "1.5", "True"}},
		{"dotenv", "app.env", "A=alpha\nB=multi\\nline\nC=\n", []string{"alpha", "multi\nline"}},
		{"binary", "cert.pem", "-----BEGIN KEY-----\n\x00\x01\n", []string{"-----BEGIN KEY-----\n\x00\x01\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := Encrypt(tt.file, []byte(tt.plain), recipient, "age18tk4z00hdm8z2c3205wsppcld2tta97gszg2cdq2vw73zsqm7atqdnw3df")
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tt.values {
				if len(v) > 3 && bytes.Contains(enc, []byte(v)) {
					t.Errorf("Encrypt left %q in the file:\n%s", v, enc)
				}
			}
			if !Encrypted(tt.file, enc) {
				t.Errorf("Encrypted(%s, Encrypt(...)) = false", tt.file)
			}
			got, err := keys.Decrypt(tt.file, enc)
			if err != nil {
				t.Fatalf("Decrypt(Encrypt(x)): %v", err)
			}
			if diff := cmp.Diff(tt.plain, string(got.Data)); diff != "" {
				t.Errorf("Decrypt(Encrypt(x)) (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.values, got.Values); diff != "" {
				t.Errorf("Values (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncryptedTellsSopsFilesFromPlainOnes(t *testing.T) {
	tests := []struct {
		name string
		file string
		data []byte
		want bool
	}{
		{"sops yaml", "secrets.enc.yaml", readTestdata(t, "secrets.enc.yaml"), true},
		{"sops json", "secrets.enc.json", readTestdata(t, "secrets.enc.json"), true},
		{"sops dotenv", "app.enc.env", readTestdata(t, "app.enc.env"), true},
		{"sops binary", "blob.bin.enc", readTestdata(t, "blob.bin.enc"), true},
		{"sops ini", "x.ini", []byte("[app]\na=b\n[sops]\nmac=x\n"), true},
		{"plain yaml", "secrets.yaml", readTestdata(t, "secrets.yaml"), false},
		{"plain json", "secrets.json", readTestdata(t, "secrets.json"), false},
		{"plain dotenv", "app.env", readTestdata(t, "app.env"), false},
		{"plain bytes", "blob.bin", readTestdata(t, "blob.bin"), false},
		{"a yaml sops key without a MAC", "x.yaml", []byte("sops:\n  note: a key an application uses\n"), false},
		{"a sops yaml file named as binary", "secrets.enc", readTestdata(t, "secrets.enc.yaml"), false},
		{"empty", "x.yaml", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Encrypted(tt.file, tt.data); got != tt.want {
				t.Errorf("Encrypted(%s) = %v, want %v", tt.file, got, tt.want)
			}
		})
	}
}

func TestFormatOfFollowsTheSopsTool(t *testing.T) {
	for name, want := range map[string]Format{
		"db.enc.yaml": YAML, "db.YML": YAML, "a.json": JSON, ".env": Dotenv, "prod.enc.env": Dotenv,
		"x.ini": INI, "cert.pem": Binary, "token": Binary, "app.env.enc": Binary, `dir\win.json`: JSON,
	} {
		if got := FormatOf(name); got != want {
			t.Errorf("FormatOf(%q) = %s, want %s", name, got, want)
		}
	}
}

func TestPlaintextPrintsNoValue(t *testing.T) {
	p := Plaintext{Data: []byte("hunter2"), Values: []string{"hunter2"}}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "p", p)
	for _, s := range []string{fmt.Sprint(p), fmt.Sprintf("%+v", p), fmt.Sprintf("%#v", p), fmt.Sprintf("%s", p), fmt.Sprintf("%v", []Plaintext{p}), logged.String()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("printed %q", s)
		}
	}
}

func TestKeysNeverEchoTheIdentityFile(t *testing.T) {
	secret := "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"
	_, err := ParseKeys(strings.NewReader("# comment\n" + secret + "\n"))
	if err == nil || strings.Contains(err.Error(), "QQQQ") || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("ParseKeys(bad key) = %v; want an error naming line 2 without the key", err)
	}
	keys := loadKeys(t, "age.key")
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "keys", keys)
	for _, s := range []string{fmt.Sprint(keys), logged.String()} {
		if strings.Contains(s, "AGE-SECRET-KEY") || !strings.Contains(s, recipient) {
			t.Errorf("Keys printed as %q; want the recipient only", s)
		}
	}
	if _, err := LoadKeys(filepath.Join("testdata", "secrets.yaml")); err == nil || strings.Contains(err.Error(), "database") {
		t.Errorf("LoadKeys(not a key file) = %v", err)
	}
}

func FuzzDecrypt(f *testing.F) {
	names := []string{"secrets.enc.yaml", "secrets.enc.json", "app.enc.env", "blob.bin.enc", "rules.enc.yaml", "shared.enc.env"}
	originals := map[string][]string{}
	keys, err := LoadKeys(filepath.Join("testdata", "age.key"))
	if err != nil {
		f.Fatal(err)
	}
	for i, name := range names {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil || len(data) == 0 {
			f.Fatalf("seed %s: %v", name, err)
		}
		p, err := keys.Decrypt(name, data)
		if err != nil {
			f.Fatal(err)
		}
		originals[name] = p.Values
		f.Add(uint8(i), data)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		name := names[int(which)%len(names)]
		Encrypted(name, data)
		got, err := keys.Decrypt(name, data)
		if err != nil {
			return
		}
		// The MAC covers every value: however the file was changed, if it
		// still decrypts, it holds the values it was encrypted with.
		if !slices.Equal(got.Values, originals[name]) {
			t.Errorf("Decrypt of a changed %s succeeded with other values", name)
		}
	})
}

// Sealed keys open nothing: every encrypted value stands in by a digest
// of its ciphertext, in the file's own format, so a render still parses;
// the plain parts stay, and no value reaches the result.
func TestSealedKeysStandValuesInWithoutOpeningThem(t *testing.T) {
	tests := []struct {
		name, file, plain string
		values            []string
		keeps             string // plain text the stand-in file keeps
	}{
		{"yaml", "db.yaml", "user: app\npassword: hunter2\nnote_unencrypted: plain\n", []string{"app", "hunter2"}, "note_unencrypted: plain"},
		{"dotenv", "app.env", "A=alpha\nB=beta\n", []string{"alpha", "beta"}, "A=sealed:"},
		{"binary", "cert.pem", "-----BEGIN KEY-----\nsecret\n", []string{"secret"}, "sealed:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := Encrypt(tt.file, []byte(tt.plain), recipient)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Sealed().Decrypt(tt.file, enc)
			if err != nil {
				t.Fatalf("Sealed().Decrypt: %v", err)
			}
			for _, v := range tt.values {
				if bytes.Contains(got.Data, []byte(v)) {
					t.Errorf("sealed data holds the value %q:\n%s", v, got.Data)
				}
			}
			if !strings.Contains(string(got.Data), tt.keeps) || len(got.Values) != 0 {
				t.Errorf("sealed = %q with values %q, want it to keep %q and list no value", got.Data, got.Values, tt.keeps)
			}
			again, err := Sealed().Decrypt(tt.file, enc)
			if err != nil || !bytes.Equal(again.Data, got.Data) {
				t.Errorf("sealing the same file twice = %q, %v; want %q", again.Data, err, got.Data)
			}
			reencrypted, err := Encrypt(tt.file, []byte(tt.plain), recipient)
			if err != nil {
				t.Fatal(err)
			}
			if other, err := Sealed().Decrypt(tt.file, reencrypted); err != nil || bytes.Equal(other.Data, got.Data) {
				t.Errorf("sealing a file encrypted anew = %q, %v; want other stand-ins (its ciphertext changed)", other.Data, err)
			}
		})
	}
	if _, err := Sealed().Decrypt("db.yaml", []byte("user: app\n")); err == nil {
		t.Error("Sealed().Decrypt of a plain file succeeded, want not a SOPS file")
	}
	if s := Sealed().String(); strings.Contains(s, "age1") {
		t.Errorf("Sealed().String() = %q", s)
	}
}
