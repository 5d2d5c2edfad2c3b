package client

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/wire"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnvironmentPrefersTheEnvironmentOverTheConfigFile(t *testing.T) {
	home := t.TempDir()
	cfgDir := filepath.Join(home, ".config", "skep")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) string {
		p := filepath.Join(home, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(".config/skep/config.yaml", "server: https://from-config.example\ntokenFile: ~/config.token\n")
	write("config.token", "from-config-file\n")
	envToken := write("env.token", "from-env-file\n")

	// A server that reports which token it got.
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		fmt.Fprint(w, `{"version":"v","commit":"c","goVersion":"go","apiVersion":"v1","capabilities":[]}`)
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name       string
		env        map[string]string
		wantServer string
		wantToken  string
	}{
		{"config file alone", map[string]string{"HOME": home}, "https://from-config.example", "from-config-file"},
		{"SKEP_SERVER wins", map[string]string{"HOME": home, EnvServer: srv.URL}, srv.URL, "from-config-file"},
		{"SKEP_TOKEN wins over the config's file", map[string]string{"HOME": home, EnvServer: srv.URL, EnvToken: "from-env"}, srv.URL, "from-env"},
		{"SKEP_TOKEN_FILE wins over SKEP_TOKEN", map[string]string{"HOME": home, EnvServer: srv.URL, EnvToken: "from-env", EnvTokenFile: envToken}, srv.URL, "from-env-file"},
		{"no config file means the default server", map[string]string{"HOME": t.TempDir()}, DefaultServer, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnvironment(envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.Server() != tc.wantServer {
				t.Errorf("server = %s, want %s", c.Server(), tc.wantServer)
			}
			if tc.wantServer == srv.URL {
				got = ""
				if _, err := c.Version(t.Context()); err != nil {
					t.Fatal(err)
				}
				if got != tc.wantToken {
					t.Errorf("token sent = %q, want %q", got, tc.wantToken)
				}
			}
		})
	}

	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown key in the config file", map[string]string{EnvConfig: write("bad.yaml", "server: x\ntoken: secret\n")}, "field token not found"},
		{"a named config file that is missing", map[string]string{EnvConfig: filepath.Join(home, "nope.yaml")}, "client config"},
		{"an empty token file", map[string]string{"HOME": home, EnvTokenFile: write("empty.token", "\n")}, "is empty"},
		{"a server URL with a password", map[string]string{"HOME": home, EnvServer: "https://u:p@h.example"}, "must not carry credentials"},
		{"a server that is not a URL", map[string]string{"HOME": home, EnvServer: "h.example:8080"}, "want an http:// or https:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromEnvironment(envOf(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("FromEnvironment error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestErrorsSayWhatWentWrong(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/status":
			w.WriteHeader(401)
			fmt.Fprint(w, `{"code":"unauthorized","message":"a valid bearer token is required"}`)
		case "/api/v1/applications/db":
			w.WriteHeader(403)
			fmt.Fprint(w, `{"code":"forbidden","message":"webteam may not access application \"db\""}`)
		default:
			w.WriteHeader(502)
			fmt.Fprint(w, "bad gateway from a proxy")
		}
	}))
	defer srv.Close()
	c, err := New(Options{Server: srv.URL, Token: wire.NewToken("tok-secret")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(t.Context())
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), EnvTokenFile) {
		t.Errorf("401 error = %v, want ErrUnauthorized naming %s", err, EnvTokenFile)
	}
	_, err = c.Application(t.Context(), "db")
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), `may not access application "db"`) {
		t.Errorf("403 error = %v", err)
	}
	_, err = c.ListApplications(t.Context())
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 502 || !strings.Contains(err.Error(), "bad gateway from a proxy") {
		t.Errorf("non-JSON error = %v", err)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	down, _ := New(Options{Server: "http://" + addr})
	if _, err := down.Status(t.Context()); err == nil || !strings.Contains(err.Error(), "cannot reach skep") || !strings.Contains(err.Error(), EnvServer) {
		t.Errorf("unreachable error = %v", err)
	}

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"controllerId":"x"}`)
	}))
	defer tlsSrv.Close()
	untrusted, _ := New(Options{Server: tlsSrv.URL})
	if _, err := untrusted.Status(t.Context()); err == nil || !strings.Contains(err.Error(), "TLS: cannot verify") {
		t.Errorf("untrusted TLS error = %v", err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	trusted, err := New(Options{Server: tlsSrv.URL, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := trusted.Status(t.Context()); err != nil || st.ControllerID != "x" {
		t.Errorf("with the CA file: %+v, %v", st, err)
	}
	plain, _ := New(Options{Server: strings.Replace(srv.URL, "http://", "https://", 1)})
	if _, err := plain.Status(t.Context()); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("https to a plain server error = %v", err)
	}
}

func TestTheTokenNeverPrints(t *testing.T) {
	c, err := New(Options{Server: "http://127.0.0.1:1", Token: wire.NewToken("tok-secret")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(t.Context())
	if out := fmt.Sprintf("%v %+v %#v", c, c, err); strings.Contains(out, "tok-secret") {
		t.Errorf("the token was printed: %s", out)
	}
}

func TestReadSSEDispatchesEventsAndSkipsComments(t *testing.T) {
	stream := ": connected\n\nid: 1\nevent: sync-started\ndata: {\"a\":1}\n\n: heartbeat\n\nid: 2\nevent: sync-succeeded\ndata: line1\ndata: line2\n\n"
	var got []StreamEvent
	err := readSSE(strings.NewReader(stream), func(e StreamEvent) error {
		got = append(got, e)
		return nil
	})
	if !errors.Is(err, io.EOF) {
		t.Errorf("readSSE = %v, want io.EOF at the end", err)
	}
	want := []StreamEvent{
		{ID: "1", Type: "sync-started", Data: []byte(`{"a":1}`)},
		{ID: "2", Type: "sync-succeeded", Data: []byte("line1\nline2")},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

func TestFollowResumesAfterADroppedConnection(t *testing.T) {
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		n := len(lastIDs)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		// Each connection sends one event and drops.
		fmt.Fprintf(w, "id: %d\nevent: sync-started\ndata: {}\n\n", n)
	}))
	defer srv.Close()
	c, _ := New(Options{Server: srv.URL})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var ids []string
	err := c.Follow(ctx, EventQuery{Applications: []string{"web"}}, "", func(e StreamEvent) error {
		ids = append(ids, e.ID)
		if len(ids) == 3 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Follow = %v, want the callback's error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff([]string{"", "1", "2"}, lastIDs); d != "" {
		t.Errorf("Last-Event-ID sent on each connection (-want +got):\n%s", d)
	}
}

var errStop = errors.New("stop")

func FuzzReadSSE(f *testing.F) {
	f.Add([]byte("id: 1\nevent: x\ndata: {}\n\n"))
	f.Add([]byte(": c\n\ndata: a\ndata: b\n\n"))
	f.Add([]byte("data"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := readSSE(strings.NewReader(string(data)), func(e StreamEvent) error {
			// Property: a dispatched event carries data without a frame break.
			if strings.Contains(string(e.Data), "\n\n") {
				t.Errorf("event data %q holds a blank line", e.Data)
			}
			return nil
		})
		if err == nil {
			t.Error("readSSE returned nil; it ends with io.EOF or an error")
		}
	})
}
