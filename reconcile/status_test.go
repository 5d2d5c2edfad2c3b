package reconcile

import (
	"testing"
	"time"
)

func TestSeededLastSyncStartsAnApplicationsStatusOnce(t *testing.T) {
	at := time.Date(2026, 12, 4, 18, 30, 0, 0, time.UTC)
	seed := LastSync{At: at, Revision: "aaaa", Actor: "alice"}
	s := NewStatuses()
	s.SeedLastSyncs(map[string]LastSync{"web": seed, "gone": {At: at, Revision: "bbbb"}})

	s.Update("web", func(st *AppStatus) { st.Phase = PhaseIdle })
	if got, _ := s.Get("web"); got.LastSync != seed {
		t.Errorf("a new status's LastSync = %+v, want the seed %+v", got.LastSync, seed)
	}
	// The application's own sync replaces it.
	own := LastSync{At: at.Add(time.Minute), Revision: "cccc", Trigger: TriggerGit}
	s.Update("web", func(st *AppStatus) { st.LastSync = own })
	if got, _ := s.Get("web"); got.LastSync != own {
		t.Errorf("LastSync after the application's sync = %+v, want %+v", got.LastSync, own)
	}
	// An application that left the set and came back starts afresh: the
	// seed was of the run before, and is used once.
	s.Remove("web")
	s.Update("web", func(*AppStatus) {})
	if got, _ := s.Get("web"); !got.LastSync.At.IsZero() {
		t.Errorf("LastSync of a status made again = %+v, want none", got.LastSync)
	}
	// A seed of an application outside the set makes no status.
	if _, ok := s.Get("gone"); ok || len(s.List()) != 1 {
		t.Errorf("statuses = %+v, want web's alone", s.List())
	}
}
