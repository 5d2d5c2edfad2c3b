package harness

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

// unsafeName matches what Docker object names and DNS labels refuse.
var unsafeName = regexp.MustCompile(`[^a-z0-9]+`)

// Name returns a name unique to this test run, usable as a stack namespace,
// controller id or service name: "<prefix>-<word from the test name>-<hex>",
// lower-case, at most 40 characters.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	// Random, not a counter: test binaries of several packages run at once
	// against one swarm, and each must stay out of the others' way.
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random name: %v", err)
	}
	word := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	word = strings.TrimPrefix(word, "test")
	word = strings.Trim(word, "-")
	// Service names are DNS labels (at most 63 characters), and the
	// stack prefix and task suffixes need room too.
	if len(word) > 20 {
		word = word[:20]
	}
	parts := []string{prefix}
	if word != "" {
		parts = append(parts, strings.Trim(word, "-"))
	}
	parts = append(parts, hex.EncodeToString(b))
	return strings.Join(parts, "-")
}
