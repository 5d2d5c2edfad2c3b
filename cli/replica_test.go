package cli

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/wire"
)

func TestReplicaCandidateIsNamedByItsAdvertisedAddress(t *testing.T) {
	tests := []struct {
		name      string
		advertise string
		listen    string
		want      string // the name; "" wants a usage error
	}{
		{name: "the advertised address is the name", advertise: "10.0.0.7:8080", listen: ":8080", want: "10.0.0.7:8080"},
		{name: "without one, the host name and the listen port", listen: ":9090", want: ":9090"},
		{name: "a listen address without a fixed port needs one", listen: "127.0.0.1:0"},
		{name: "an advertised address without a port is refused", advertise: "10.0.0.7", listen: ":8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := haFlags{advertise: tt.advertise}
			got, err := h.candidate(tt.listen)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("candidate = %+v, want a usage error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(got.Name, tt.want) || got.Addr != got.Name || !strings.HasPrefix(got.ID, got.Name+"/") {
				t.Errorf("candidate = %+v, want name and address ending %q and an id of its own", got, tt.want)
			}
			again, _ := h.candidate(tt.listen)
			if again.ID == got.ID {
				t.Errorf("two starts share the id %q: a restarted process would take itself for the holder", got.ID)
			}
		})
	}
}

// TestReplicasTokenIsRequiredAndIsAViewerOnly: without the shared token a
// replicated controller does not start; with it, the token reads and
// does nothing else, and alone it does not count as the API's credentials.
func TestReplicasTokenIsRequiredAndIsAViewerOnly(t *testing.T) {
	t.Setenv(api.EnvPeerToken, "")
	t.Setenv(api.EnvPeerTokenFile, "")
	if _, _, err := peerSpec(); err == nil || !strings.Contains(err.Error(), api.EnvPeerTokenFile) {
		t.Errorf("peerSpec without a token = %v, want an error naming %s", err, api.EnvPeerTokenFile)
	}
	t.Setenv(api.EnvPeerToken, "shared")
	spec, token, err := peerSpec()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Role != api.RoleViewer || spec.Digest != wire.NewToken("shared").Digest() || token.Reveal() != "shared" {
		t.Errorf("peer spec %v, want a viewer holding the token's digest", spec)
	}
	t.Setenv(api.EnvAdminToken, "")
	t.Setenv(api.EnvAdminTokenFile, "")
	var f apiFlags
	if _, err := f.authorizer(slog.New(slog.DiscardHandler), false, spec); err == nil {
		t.Error("the replicas' token alone was taken for the API's credentials")
	}
}

func TestReplicaTrustsOnlyAPeerWithItsOwnKey(t *testing.T) {
	pki := harness.NewPKI(t, filepath.Join(t.TempDir(), "pki"), "127.0.0.1")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	cert, err := tls.LoadX509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	t.Setenv(api.EnvPeerToken, "shared")
	for _, tc := range []struct {
		name      string
		cert, key string
		ok        bool
	}{
		{name: "the same key as the peer's", cert: pki.ServerCert, key: pki.ServerKey, ok: true},
		{name: "another key, even from the same authority", cert: pki.ClientCert, key: pki.ClientKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own, err := api.NewCertReloader(tc.cert, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			peer, err := peerOf(own)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: peer.Transport}).Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			if (err == nil) != tc.ok || peer.Scheme != "https" {
				t.Errorf("GET over %s = %v, want ok %v", peer.Scheme, err, tc.ok)
			}
		})
	}
}

func TestStatusShowsTheLeaderTheTermAndEachReplica(t *testing.T) {
	var b strings.Builder
	printReplication(&b, &wire.Replication{Replica: "b:8080", Role: wire.RoleStandby, Term: 7,
		Leader:   &wire.Replica{Name: "a:8080", Role: wire.RoleLeader},
		Replicas: []wire.Replica{{Name: "a:8080", Role: wire.RoleLeader, Version: "v1.2.0"}, {Name: "b:8080", Role: wire.RoleStandby, Version: "v1.2.0"}}})
	for _, want := range []string{"Leader:\ta:8080 (term 7)", "Answered by:\tb:8080 (standby)", "a:8080:\tleader, version v1.2.0", "b:8080:\tstandby"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	printReplication(&b, nil)
	if b.Len() != 0 {
		t.Errorf("a single controller's status shows replication:\n%s", b.String())
	}
}

// SKEP_LISTEN and SKEP_ADVERTISE_ADDR stand for their flags when the
// command line leaves them out, never over a flag given.
func TestListenAndAdvertiseAddrComeFromTheEnvironmentUnlessGiven(t *testing.T) {
	env := map[string]string{EnvListen: "127.0.0.1:18101", EnvAdvertiseAddr: "10.0.0.1:18101"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		name              string
		args              []string
		listen, advertise string
	}{
		{name: "neither given", listen: "127.0.0.1:18101", advertise: "10.0.0.1:18101"},
		{name: "a flag given wins", args: []string{"--listen=:9090"}, listen: ":9090", advertise: "10.0.0.1:18101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newControllerCommand()
			fs := cmd.Flags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := flagsFromEnv(fs, lookup); err != nil {
				t.Fatal(err)
			}
			listen, _ := fs.GetString("listen")
			advertise, _ := fs.GetString("advertise-addr")
			if listen != tc.listen || advertise != tc.advertise {
				t.Errorf("--listen %q, --advertise-addr %q; want %q, %q", listen, advertise, tc.listen, tc.advertise)
			}
		})
	}
	cmd := newControllerCommand()
	if err := flagsFromEnv(cmd.Flags(), func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if listen, _ := cmd.Flags().GetString("listen"); listen != ":8080" {
		t.Errorf("--listen without flag or variable = %q, want the default :8080", listen)
	}
}
