package reconcile

import (
	"testing"
	"time"
)

// TestWrittenAfterNamesWritesASnapshotMisses: a snapshot misses the writes
// that ended after it was taken and those still in flight, of the
// applications asked about only (see Fleet.LeftUnseen).
func TestWrittenAfterNamesWritesASnapshotMisses(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	var l liveIndex
	l.beginWrite("", "gone", func() time.Time { return at })()
	left := func(app string) bool { return app == "gone" }
	for _, tc := range []struct {
		name  string
		taken time.Time
		which func(string) bool
		want  bool
	}{
		{"a snapshot taken after the write shows it", at.Add(time.Second), left, false},
		{"a snapshot taken before the write misses it", at.Add(-time.Second), left, true},
		{"a snapshot taken as the write ended may miss it", at, left, true},
		{"the write of an application not asked about does not count", at.Add(-time.Second), func(string) bool { return false }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := l.writtenAfter("", tc.taken, tc.which); got != tc.want {
				t.Errorf("writtenAfter = %t, want %t", got, tc.want)
			}
		})
	}
	end := l.beginWrite("", "gone", time.Now)
	if !l.writtenAfter("", at.Add(time.Hour), left) {
		t.Error("a write in flight is not counted")
	}
	end()
}
