package notify

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// fakeSMTP is a minimal SMTP server on loopback that keeps each message's
// DATA section. It speaks only what a plain, unauthenticated client needs.
func fakeSMTP(t *testing.T) (addr string, mails <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			serveSMTP(conn, out)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), out
}

func serveSMTP(conn net.Conn, out chan<- string) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	reply := func(s string) { fmt.Fprintf(conn, "%s\r\n", s) }
	reply("220 localhost ESMTP fake")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			reply("250-localhost")
			reply("250 8BITMIME")
		case cmd == "DATA":
			reply("354 go ahead")
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(l)
			}
			out <- data.String()
			reply("250 queued")
		case cmd == "QUIT":
			reply("221 bye")
			return
		default: // MAIL, RCPT, RSET, NOOP
			reply("250 ok")
		}
	}
}

func TestChatSendsEmailThroughShoutrrrSMTP(t *testing.T) {
	addr, mails := fakeSMTP(t)
	url := "smtp://" + addr + "/?from=skep@example.com&to=ops@example.com&auth=None&encryption=None&usestarttls=no"
	c, err := NewChat(ChatOptions{Name: "mail", URL: url, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	c.Notify(t.Context(), Event{Application: "web", Type: PruneFailed, Message: "service web_old still running", Swarm: "prod"})
	var mail string
	select {
	case mail = <-mails:
	case <-t.Context().Done():
		t.Fatal("no mail arrived")
	}
	for _, want := range []string{
		"Subject: skep: web prune-failed",
		"prune-failed: web on swarm prod: service web_old still running",
		"ops@example.com",
	} {
		if !strings.Contains(mail, want) {
			t.Errorf("mail lacks %q:\n%s", want, mail)
		}
	}
	waitFor(t, func() bool { return c.Stats().Delivered == 1 })
}
