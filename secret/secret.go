// Package secret reads a secret that a configuration file names: the
// content of a file, or the value of an environment variable.
//
// A configuration file holds only where a secret lives, never the secret, so
// a file can be logged, diffed and committed. Source is that reference. Its
// String and LogValue say where the secret lives; nothing in this package
// puts a secret's value in an error, a string or a log. White space around
// a value is trimmed, since files written by editors and `echo` end in a
// newline that is not part of the secret.
//
// Reading is done on demand (Read), so a rotated file takes effect at the
// next read. The package imports no other package of Skep.
package secret

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// MaxFileSize bounds what is read of a secret file: a key, token or URL is
// small, and a path pointing at a large file by mistake must not fill memory.
const MaxFileSize = 1 << 20

// Source names where a secret is read from: File, a path, or Env, an
// environment variable's name. A usable Source sets exactly one; the zero
// value names nothing. A relative File is read relative to the working
// directory, so callers resolve it against their configuration file first.
type Source struct {
	File string
	Env  string
}

// IsZero reports whether s names no secret.
func (s Source) IsZero() bool { return s.File == "" && s.Env == "" }

// String says where the secret lives, "file:/run/secrets/token" or
// "env:TOKEN", and never what it is; "" for the zero Source.
func (s Source) String() string {
	switch {
	case s.File != "":
		return "file:" + s.File
	case s.Env != "":
		return "env:" + s.Env
	}
	return ""
}

// LogValue logs s as String does.
func (s Source) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Read returns the secret, white space at both ends trimmed. getenv looks up
// an environment variable, as os.Getenv does; tests pass their own. When
// both File and Env are set, File wins; callers refuse that in validation.
// An unreadable, missing, empty or oversized file, and an unset or empty
// variable, are errors that name the file or variable but never a value.
// Read is safe for concurrent use.
func (s Source) Read(getenv func(string) string) (string, error) {
	switch {
	case s.File != "":
		v, err := readFile(s.File)
		if err != nil {
			return "", err
		}
		if v = strings.TrimSpace(v); v == "" {
			return "", fmt.Errorf("secret file %s is empty", s.File)
		}
		return v, nil
	case s.Env != "":
		v := strings.TrimSpace(getenv(s.Env))
		if v == "" {
			return "", fmt.Errorf("environment variable %s is not set or empty", s.Env)
		}
		return v, nil
	}
	return "", ErrNoSource
}

// ErrNoSource is Read's error for a Source that names neither a file nor an
// environment variable.
var ErrNoSource = errors.New("no secret file or environment variable named")

func readFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		// The PathError names the file; it holds nothing of its content.
		return "", fmt.Errorf("read secret file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return "", fmt.Errorf("read secret file %s: %w", name, err)
	}
	if len(data) > MaxFileSize {
		return "", fmt.Errorf("secret file %s is larger than %d bytes", name, MaxFileSize)
	}
	return string(data), nil
}
