package ui_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/skep-cd/skep/notify"
)

// The events view's filter offers every event type notify raises, in its
// order: a type left out could not be selected in the UI.
func TestTheEventFilterOffersEveryEventType(t *testing.T) {
	js, err := os.ReadFile("assets/views.js")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`export const eventTypes = \[([^\]]*)\]`).FindSubmatch(js)
	if line == nil {
		t.Fatal("views.js declares no eventTypes list")
	}
	var got []string
	for _, m := range regexp.MustCompile(`'([a-z-]+)'`).FindAllSubmatch(line[1], -1) {
		got = append(got, string(m[1]))
	}
	var want []string
	for _, typ := range notify.Types() {
		want = append(want, string(typ))
	}
	if !slices.Equal(got, want) {
		t.Errorf("eventTypes = %q, want notify's %q", got, want)
	}
}
