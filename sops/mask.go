package sops

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
)

// Masker replaces decrypted values in text by their masks. It is
// immutable and safe for concurrent use; the zero value masks nothing.
type Masker struct {
	r *strings.Replacer
}

// NewMasker returns a Masker of values (Plaintext.Values, typically):
// every occurrence of each, and of its Go-quoted form (as plans print
// strings), becomes "(sops:" + 16 hex digits of its SHA-256 + ")", which
// tells a changed value from an unchanged one and shows nothing else.
// Longer values are matched first, in one pass, so a value inside another
// is not half-masked and a mask is never masked again. Empty values are
// ignored; values is only read.
func NewMasker(values []string) *Masker {
	var pairs []string
	for _, v := range longestFirst(values) {
		m := maskOf(v)
		pairs = append(pairs, v, m)
		if q := quotedInner(v); q != v {
			pairs = append(pairs, q, m)
		}
	}
	if len(pairs) == 0 {
		return &Masker{}
	}
	return &Masker{r: strings.NewReplacer(pairs...)}
}

// Mask returns s with every value of m masked.
func (m *Masker) Mask(s string) string {
	if m == nil || m.r == nil || s == "" {
		return s
	}
	return m.r.Replace(s)
}

// Mask is NewMasker(values).Mask(s).
func Mask(s string, values []string) string {
	if len(values) == 0 {
		return s
	}
	return NewMasker(values).Mask(s)
}

// MaskOf is the mask of the whole of v: what NewMasker makes of v.
func MaskOf(v string) string {
	return maskOf(v)
}

// maskOf is the stand-in for one value.
func maskOf(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "(sops:" + hex.EncodeToString(sum[:8]) + ")"
}

// quotedInner is v as strconv.Quote writes it, without the quotes.
func quotedInner(v string) string {
	q := strconv.Quote(v)
	return q[1 : len(q)-1]
}

// longestFirst returns the non-empty values, without repeats, longest
// first, in a new slice.
func longestFirst(values []string) []string {
	out := slices.DeleteFunc(slices.Clone(values), func(v string) bool { return v == "" })
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	return slices.Compact(out)
}
