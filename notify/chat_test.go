package notify

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestChatSendsTheTemplatedMessageThroughShoutrrr(t *testing.T) {
	event := Event{Application: "web", Type: SyncFailed, Revision: "0123456789abcdef", Message: "image missing",
		At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Swarm: "prod", Actor: "alice"}
	for _, tc := range []struct {
		name        string
		url         func(host string) string
		title, text string
		check       func(t *testing.T, got received)
	}{
		{
			name: "the default template as plain text to a generic webhook",
			url:  func(host string) string { return "generic+http://" + host + "/chat" },
			check: func(t *testing.T, got received) {
				want := "sync-failed: web on swarm prod at 0123456 by alice: image missing"
				if string(got.body) != want {
					t.Errorf("body = %q, want %q", got.body, want)
				}
				if got.path != "/chat" {
					t.Errorf("path = %q", got.path)
				}
			},
		},
		{
			name:  "a custom title and template in shoutrrr's JSON payload",
			url:   func(host string) string { return "generic://" + host + "/chat?template=json&disabletls=yes" },
			title: "{{.Swarm}}/{{.Application}}",
			text:  "{{.Type}} {{with .Actor}}({{.}}){{end}} {{json .}}",
			check: func(t *testing.T, got received) {
				var payload map[string]string
				if err := json.Unmarshal(got.body, &payload); err != nil {
					t.Fatalf("payload %q: %v", got.body, err)
				}
				want := map[string]string{
					"title": "prod/web",
					"message": `sync-failed (alice) {"application":"web","swarm":"prod","type":"sync-failed","revision":"0123456789abcdef",` +
						`"message":"image missing","actor":"alice","at":"2026-01-02T03:04:05Z"}`,
				}
				if d := cmp.Diff(want, payload); d != "" {
					t.Errorf("payload (-want +got):\n%s", d)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t)
			c, err := NewChat(ChatOptions{Name: "chat", URL: tc.url(strings.TrimPrefix(rcv.URL, "http://")),
				Title: tc.title, Template: tc.text, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			run(t, c)
			c.Notify(t.Context(), event)
			tc.check(t, rcv.next(t))
			waitFor(t, func() bool { return c.Stats().Delivered == 1 })
		})
	}
}

func TestChatRoutesAndSuppressesLikeEveryOutboundNotifier(t *testing.T) {
	rcv := newReceiver(t)
	c, err := NewChat(ChatOptions{Name: "chat", URL: "generic+" + rcv.URL + "/chat", Template: "{{.Application}}",
		Delivery: Delivery{Match: Match{Applications: []string{"web*"}}, Suppress: time.Hour}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	for _, app := range []string{"web", "api", "web", "web-2"} {
		c.Notify(t.Context(), Event{Application: app, Type: SyncFailed})
	}
	var got []string
	for range 2 {
		got = append(got, string(rcv.next(t).body))
	}
	if d := cmp.Diff([]string{"web", "web-2"}, got); d != "" {
		t.Errorf("sent (-want +got):\n%s", d)
	}
	waitFor(t, func() bool { return c.Stats().Suppressed == 2 })
}

func TestChatNeverNamesItsURL(t *testing.T) {
	rcv := newReceiver(t)
	rcv.answer(http.StatusInternalServerError)
	token := "T0001/B0001/sekrit-token-value"
	var logs syncLog
	c, err := NewChat(ChatOptions{Name: "chat", URL: "generic+" + rcv.URL + "/services/" + token,
		Delivery: Delivery{Retries: -1}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	c.Notify(t.Context(), Event{Application: "web", Type: SyncFailed})
	waitFor(t, func() bool { return c.Stats().Failed == 1 })
	if out := logs.String(); !strings.Contains(out, "notification not delivered") || strings.Contains(out, "sekrit") {
		t.Errorf("failure log missing or naming the secret:\n%s", out)
	}
	for _, bad := range []string{
		"nosuchservice://" + token + "@host",
		"slack://%zz" + token,
	} {
		_, err := NewChat(ChatOptions{Name: "chat", URL: bad})
		if err == nil {
			t.Errorf("NewChat accepted %q", bad)
			continue
		}
		if strings.Contains(err.Error(), "sekrit") {
			t.Errorf("NewChat error names the secret: %v", err)
		}
	}
}

func TestChatRefusesATemplateThatDoesNotParse(t *testing.T) {
	if _, err := NewChat(ChatOptions{Name: "chat", URL: "generic+http://127.0.0.1:1/x", Template: "{{.Application"}); err == nil {
		t.Error("NewChat accepted a broken template")
	}
}

func TestTheDefaultMessageOfASwarmEventNamesNoApplication(t *testing.T) {
	c, err := NewChat(ChatOptions{Name: "chat", URL: "generic+http://127.0.0.1:1/chat", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	title, text, err := c.Message(Event{Type: SwarmUnreachable, Swarm: "edge", Message: "no manager answered"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "swarm-unreachable on swarm edge: no manager answered"; text != want {
		t.Errorf("text = %q, want %q", text, want)
	}
	if want := "skep: swarm-unreachable"; title != want {
		t.Errorf("title = %q, want %q", title, want)
	}
}
