package swarm

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/harness"
)

func TestParseDestinationsReportsEveryProblemWithItsLine(t *testing.T) {
	const file = `apiVersion: skep/v1
kind: Destinations
destinations:
  - name: Prod
    managers: []
  - name: staging
    managers:
      - host: tcp://10.0.0.1:2376
      - host: ssh://10.0.0.2
        ssh: {key: /k}
      - host: http://10.0.0.3
  - name: staging
    managers:
      - host: unix:///run/docker.sock
`
	_, err := ParseDestinations("dest.yaml", []byte(file))
	var problems configfile.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("ParseDestinations = %v, want configfile.Problems", err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	for _, want := range []string{
		`dest.yaml:4:11: destinations[0].name: want lower-case letters, digits and '-' (at most 63), got "Prod"`,
		`dest.yaml:5:15: destinations[0].managers: missing; want at least one manager`,
		`destinations[1].managers[0].tls: missing; a tcp host needs tls: {ca, cert, key} (the Engine API is never reached in clear text)`,
		`destinations[1].managers[1].host: want ssh://user@host[:port], got "ssh://10.0.0.2"`,
		`destinations[1].managers[1].ssh.knownHosts: missing; want the path of a known_hosts file holding the host's key`,
		`destinations[1].managers[2].host: scheme "http": want unix, tcp or ssh`,
		`dest.yaml:12:11: destinations[2].name: "staging" is defined twice`,
	} {
		if !containsSub(got, want) {
			t.Errorf("no problem %q in:\n%s", want, strings.Join(got, "\n"))
		}
	}
}

func TestParseDestinationsReadsEveryTransport(t *testing.T) {
	const file = `apiVersion: skep/v1
kind: Destinations
destinations:
  - name: prod
    managers:
      - host: tcp://10.0.0.1:2376
        tls: {ca: /ca.pem, cert: /cert.pem, key: /key.pem}
      - host: ssh://deploy@10.0.0.2:2222
        ssh: {key: /id, knownHosts: /kh}
      - host: unix:///run/prod.sock
`
	dests, err := ParseDestinations("dest.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	p := dests["prod"]
	if len(p.Managers) != 3 || p.Managers[0].TLS.CA != "/ca.pem" || p.Managers[1].SSH.KnownHosts != "/kh" || p.Managers[2].Scheme() != "unix" {
		t.Errorf("prod = %+v", p)
	}
	if got := Known(dests); got != `"", prod` {
		t.Errorf("Known = %q", got)
	}
}

func TestCheckFilesNamesTheDestinationAndTheBadFile(t *testing.T) {
	dir := t.TempDir()
	pki := harness.NewPKI(t, dir, "127.0.0.1")
	other := harness.NewPKI(t, filepath.Join(dir, "other"), "127.0.0.1")
	// A key that does not belong to the certificate.
	bad := Destination{Name: "prod", Managers: []Manager{{Host: "tcp://127.0.0.1:2376",
		TLS: &TLSFiles{CA: pki.CA, Cert: pki.ClientCert, Key: other.ClientKey}}}}
	if err := bad.CheckFiles(); err == nil || !strings.Contains(err.Error(), `destination "prod", manager 0 (tcp://127.0.0.1:2376): tls.cert and tls.key`) {
		t.Errorf("mismatched key: %v", err)
	}
	missing := Destination{Name: "prod", Managers: []Manager{{Host: "tcp://127.0.0.1:2376",
		TLS: &TLSFiles{CA: filepath.Join(dir, "nope.pem"), Cert: pki.ClientCert, Key: pki.ClientKey}}}}
	if err := missing.CheckFiles(); err == nil || !strings.Contains(err.Error(), "tls.ca") {
		t.Errorf("missing CA: %v", err)
	}
	key := filepath.Join(dir, "id")
	kh := filepath.Join(dir, "known_hosts")
	writeFile(t, key, "not checked beyond being there")
	writeFile(t, kh, "[127.0.0.1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHn4nXPh0JiP7pA3wGm1FvZfcsJ8RZx3cyq0XqVHwLQF\n")
	unknown := Destination{Name: "edge", Managers: []Manager{{Host: "ssh://deploy@127.0.0.1:2223", SSH: &SSHFiles{Key: key, KnownHosts: kh}}}}
	if err := unknown.CheckFiles(); err == nil || !strings.Contains(err.Error(), `destination "edge"`) || !strings.Contains(err.Error(), "has no key for [127.0.0.1]:2223") {
		t.Errorf("host missing from known_hosts: %v", err)
	}
	known := Destination{Name: "edge", Managers: []Manager{{Host: "ssh://deploy@127.0.0.1:2222", SSH: &SSHFiles{Key: key, KnownHosts: kh}}}}
	if err := known.CheckFiles(); err != nil {
		t.Errorf("host in known_hosts: %v", err)
	}
}

func TestAManagerWhoseCertificateDoesNotVerifyIsATrustErrorNamingTheDestination(t *testing.T) {
	dir := t.TempDir()
	server := harness.NewPKI(t, filepath.Join(dir, "server"), "127.0.0.1")
	client := harness.NewPKI(t, filepath.Join(dir, "client"), "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(server.ServerCert, server.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	// The client trusts its own CA, which did not sign the server.
	c, err := New(Options{Destination: Destination{Name: "prod", Managers: []Manager{{Host: "tcp://" + ln.Addr().String(),
		TLS: &TLSFiles{CA: client.CA, Cert: client.ClientCert, Key: client.ClientKey}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Probe(t.Context())
	if err == nil || !IsTrustError(err) || !strings.Contains(err.Error(), `swarm "prod"`) {
		t.Fatalf("Probe = %v, want a trust error naming swarm \"prod\"", err)
	}
}

func TestFailoverSkipsADeadManager(t *testing.T) {
	harness.RequireSwarm(t)
	dead := "unix://" + filepath.Join(t.TempDir(), "dead.sock")
	live := os.Getenv("DOCKER_HOST")
	if live == "" {
		live = "unix:///var/run/docker.sock"
	}
	c, err := Connect(t.Context(), Options{Destination: Destination{Name: "twice", Managers: []Manager{{Host: dead}, {Host: live}}}})
	if err != nil {
		t.Fatalf("Connect with a dead first manager = %v", err)
	}
	defer c.Close()
	if id := c.Identity(); id.Destination != "twice" || id.NodeID == "" {
		t.Errorf("identity = %+v", id)
	}
	// Only dead managers: the error names the destination and each manager.
	_, err = Connect(t.Context(), Options{Destination: Destination{Name: "gone", Managers: []Manager{{Host: dead}}}})
	if err == nil || !strings.Contains(err.Error(), `swarm "gone"`) || !strings.Contains(err.Error(), dead) || IsTrustError(err) {
		t.Errorf("Connect to dead managers = %v", err)
	}
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLocalDestinationPutsDockerHostFirstAndRefusesClearText(t *testing.T) {
	certs := filepath.Join("/etc", "skep", "certs")
	for _, tc := range []struct {
		name      string
		env       map[string]string
		fallbacks []string
		want      Destination
		wantErr   []string
	}{
		{name: "no fallbacks is DOCKER_HOST alone, as before", env: map[string]string{"DOCKER_HOST": "unix:///a.sock"}},
		{name: "the default socket comes first without DOCKER_HOST", fallbacks: []string{"unix:///b.sock"},
			want: Destination{Managers: []Manager{{Host: "unix:///var/run/docker.sock"}, {Host: "unix:///b.sock"}}}},
		{name: "DOCKER_HOST comes first, fallbacks in order",
			env: map[string]string{"DOCKER_HOST": "unix:///a.sock"}, fallbacks: []string{"unix:///c.sock", " unix:///b.sock"},
			want: Destination{Managers: []Manager{{Host: "unix:///a.sock"}, {Host: "unix:///c.sock"}, {Host: "unix:///b.sock"}}}},
		{name: "a tcp manager takes the TLS files of DOCKER_CERT_PATH",
			env: map[string]string{"DOCKER_HOST": "tcp://10.0.0.1:2376", "DOCKER_CERT_PATH": certs}, fallbacks: []string{"tcp://10.0.0.2:2376"},
			want: Destination{Managers: []Manager{
				{Host: "tcp://10.0.0.1:2376", TLS: &TLSFiles{CA: certs + "/ca.pem", Cert: certs + "/cert.pem", Key: certs + "/key.pem"}},
				{Host: "tcp://10.0.0.2:2376", TLS: &TLSFiles{CA: certs + "/ca.pem", Cert: certs + "/cert.pem", Key: certs + "/key.pem"}}}}},
		{name: "a tcp manager without DOCKER_CERT_PATH is refused, never clear text",
			fallbacks: []string{"tcp://10.0.0.2:2376"}, wantErr: []string{"local manager 1", "DOCKER_CERT_PATH"}},
		{name: "every bad address is named at once",
			env: map[string]string{"DOCKER_HOST": "ssh://deploy@10.0.0.1"}, fallbacks: []string{"10.0.0.2:2376", "unix://"},
			wantErr: []string{"DOCKER_HOST", `"ssh://deploy@10.0.0.1"`, "local manager 1", "local manager 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LocalDestination(func(k string) string { return tc.env[k] }, tc.fallbacks)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("LocalDestination = %+v, want an error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LocalDestination (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLocalSwarmWithAFallbackSkipsADeadDockerHost: a client of the local
// swarm whose DOCKER_HOST does not answer reaches the swarm through its
// fallback manager, and an error names every manager it tried.
func TestLocalSwarmWithAFallbackSkipsADeadDockerHost(t *testing.T) {
	harness.RequireSwarm(t)
	live := os.Getenv("DOCKER_HOST")
	if live == "" {
		live = "unix:///var/run/docker.sock"
	}
	dead := "unix://" + filepath.Join(t.TempDir(), "dead.sock")
	t.Setenv("DOCKER_HOST", dead)
	dest, err := LocalDestination(os.Getenv, []string{live})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(t.Context(), Options{Destination: dest})
	if err != nil {
		t.Fatalf("Connect with a dead DOCKER_HOST and a live fallback = %v", err)
	}
	defer c.Close()
	if id := c.Identity(); id.Destination != Local || id.NodeID == "" {
		t.Errorf("identity = %+v, want the local swarm's manager", id)
	}
	dest, err = LocalDestination(os.Getenv, []string{dead + "2"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Connect(t.Context(), Options{Destination: dest})
	if err == nil || !strings.Contains(err.Error(), "the local swarm") || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), dead+"2") {
		t.Errorf("Connect to dead local managers = %v, want an error naming the local swarm and both managers", err)
	}
}
