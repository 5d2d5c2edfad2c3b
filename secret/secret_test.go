package secret

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadTakesTheSecretFromItsSource(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOKEN": "  env-secret\n", "BLANK": " \n"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name    string
		src     Source
		want    string
		wantErr string
	}{
		{name: "a file's content has its trailing newline trimmed", src: Source{File: "testdata/token"}, want: "hunter2-file-secret"},
		{name: "a variable's value has its surrounding white space trimmed", src: Source{Env: "TOKEN"}, want: "env-secret"},
		{name: "the file wins over the variable", src: Source{File: "testdata/token", Env: "TOKEN"}, want: "hunter2-file-secret"},
		{name: "a missing file is named", src: Source{File: "testdata/missing"}, wantErr: "read secret file: open testdata/missing: no such file or directory"},
		{name: "an empty file is named", src: Source{File: "testdata/blank"}, wantErr: "secret file testdata/blank is empty"},
		{name: "a file past the size cap is refused unread", src: Source{File: big}, wantErr: fmt.Sprintf("secret file %s is larger than %d bytes", big, MaxFileSize)},
		{name: "an unset variable is named", src: Source{Env: "NOPE"}, wantErr: "environment variable NOPE is not set or empty"},
		{name: "a blank variable is named", src: Source{Env: "BLANK"}, wantErr: "environment variable BLANK is not set or empty"},
		{name: "a zero source names nothing", src: Source{}, wantErr: ErrNoSource.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.src.Read(getenv)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Read() = %q, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Read() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := (Source{}).Read(getenv); !errors.Is(err, ErrNoSource) {
		t.Errorf("Read of a zero Source = %v, want ErrNoSource", err)
	}
}

func TestSourceTextSaysWhereNeverWhat(t *testing.T) {
	const value = "hunter2-file-secret"
	t.Setenv("SKEP_TEST_SECRET", value)
	var out bytes.Buffer
	for _, s := range []Source{{File: "testdata/token"}, {Env: "SKEP_TEST_SECRET"}} {
		if _, err := s.Read(os.Getenv); err != nil {
			t.Fatal(err)
		}
		slog.New(slog.NewJSONHandler(&out, nil)).Info("secret", "source", s)
		slog.New(slog.NewTextHandler(&out, nil)).Info("secret", "source", s)
		fmt.Fprintf(&out, "%v %+v %s\n", s, s, s)
	}
	if strings.Contains(out.String(), value) {
		t.Errorf("a secret value was printed:\n%s", out.String())
	}
	for _, want := range []string{"file:testdata/token", "env:SKEP_TEST_SECRET"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// FuzzRead holds Read to its contract on any file content: it never
// panics, and gives either an error that does not hold the content or a
// value without white space at either end.
func FuzzRead(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in testdata: %v", err)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil || len(data) == 0 {
			f.Fatalf("seed %s is unreadable or empty: %v", s, err)
		}
		f.Add(data)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		name := filepath.Join(dir, "secret")
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
		v, err := Source{File: name}.Read(os.Getenv)
		if err != nil {
			if trimmed := strings.TrimSpace(string(data)); len(trimmed) > 3 && strings.Contains(err.Error(), trimmed) {
				t.Errorf("error %q holds the file's content", err)
			}
			return
		}
		if v == "" || v != strings.TrimSpace(v) {
			t.Errorf("Read() = %q, want a non-empty value without surrounding white space", v)
		}
	})
}
