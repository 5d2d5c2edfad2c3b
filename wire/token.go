package wire

import (
	"crypto/sha256"
	"log/slog"
)

// Token is a bearer secret. It never prints: String, GoString and LogValue
// redact it, and the value sits behind a pointer so that even a struct
// holding a Token, printed with %+v, shows an address and not the secret.
// The zero value is the empty token.
type Token struct{ value *string }

// NewToken wraps a secret value.
func NewToken(value string) Token { return Token{value: &value} }

func (Token) String() string                 { return "[redacted]" }
func (Token) GoString() string               { return "wire.Token([redacted])" }
func (Token) LogValue() slog.Value           { return slog.StringValue("[redacted]") }
func (t Token) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// Empty reports whether the token has no value.
func (t Token) Empty() bool { return t.Reveal() == "" }

// Digest returns the SHA-256 of the token, what Tokens compares.
func (t Token) Digest() [sha256.Size]byte { return sha256.Sum256([]byte(t.Reveal())) }

// Reveal returns the secret value, for the one place that sends it.
func (t Token) Reveal() string {
	if t.value == nil {
		return ""
	}
	return *t.value
}
