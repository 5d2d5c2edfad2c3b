package swarm

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
