package sops

import (
	"strconv"
	"testing"
)

func TestMaskHidesEachValueAndItsQuotedForm(t *testing.T) {
	pw, long := "hunter2", "hunter2-and-more"
	tests := []struct {
		name, in string
		values   []string
		want     string
	}{
		{"a value alone", "DB_PASSWORD=hunter2", []string{pw}, "DB_PASSWORD=" + maskOf(pw)},
		{"inside a URL", "postgres://app:hunter2@db/x", []string{pw}, "postgres://app:" + maskOf(pw) + "@db/x"},
		{"the longer value wins", "hunter2-and-more hunter2", []string{pw, long}, maskOf(long) + " " + maskOf(pw)},
		{"as a plan quotes it", strconv.Quote("line\nbreak"), []string{"line\nbreak"}, `"` + maskOf("line\nbreak") + `"`},
		{"empty values are ignored", "a=b", []string{""}, "a=b"},
		{"no values", "hunter2", nil, "hunter2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Mask(tt.in, tt.values); got != tt.want {
				t.Errorf("Mask(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
