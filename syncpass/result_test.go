package syncpass

import (
	"testing"

	"github.com/skep-cd/skep/apply"
)

func TestASyncNamesWhatStartedIt(t *testing.T) {
	recorded := &apply.Revision{Number: 1, Commit: "old"}
	for _, tc := range []struct {
		name     string
		ask      Ask
		recorded *apply.Revision
		commit   string
		want     Trigger
	}{
		{"a requested sync is a sync, whatever git did", Ask{Sync: true, Actor: "alice"}, recorded, "new", TriggerSync},
		{"a requested sync a webhook also asked for is still a sync", Ask{Sync: true, Actor: "alice", Webhook: true}, recorded, "new", TriggerSync},
		{"a webhook's refresh is the webhook", Ask{Webhook: true}, recorded, "new", TriggerWebhook},
		{"a webhook's refresh at the deployed commit is still the webhook", Ask{Webhook: true}, recorded, "old", TriggerWebhook},
		{"a tick that found a new commit is git", Ask{}, recorded, "new", TriggerGit},
		{"a first install on a tick is git", Ask{}, nil, "new", TriggerGit},
		{"a tick that applied at the same commit is the interval", Ask{}, recorded, "old", TriggerInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := triggerOf(tc.ask, tc.recorded, tc.commit); got != tc.want {
				t.Errorf("triggerOf(%+v) = %q, want %q", tc.ask, got, tc.want)
			}
		})
	}
}
