package swarm

import (
	"errors"
	"testing"

	"github.com/skep-cd/skep/configfile"
)

// FuzzParseDestinations checks that a destinations file never panics the
// parser, and that it yields either problems naming the file or
// destinations that each have a valid name and at least one manager with
// the files its transport needs.
func FuzzParseDestinations(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: skep/v1\nkind: Destinations\ndestinations:\n  - name: prod\n    managers:\n      - host: unix:///run/prod.sock\n",
		"apiVersion: skep/v1\nkind: Destinations\ndestinations:\n  - name: a\n    managers:\n      - host: tcp://10.0.0.1:2376\n        tls: {ca: /ca, cert: /c, key: /k}\n      - host: ssh://u@h:22/run/d.sock\n        ssh: {key: /id, knownHosts: /kh}\n",
		"destinations: [{name: '', managers: [{host: 'http://x'}]}]",
		"apiVersion: skep/v1\nkind: Destinations\ndestinations: &a [*a]\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dests, err := ParseDestinations("dest.yaml", data)
		if err != nil {
			var problems configfile.Problems
			if !errors.As(err, &problems) || len(problems) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty configfile.Problems", err, err)
			}
			for _, p := range problems {
				if p.File != "dest.yaml" || p.Message == "" {
					t.Fatalf("problem %+v lacks its file or message", p)
				}
			}
			return
		}
		for name, d := range dests {
			if name == Local || name != d.Name || !destinationName.MatchString(name) || len(d.Managers) == 0 {
				t.Fatalf("accepted destination %q: %+v", name, d)
			}
			for _, m := range d.Managers {
				switch m.Scheme() {
				case "unix":
				case "tcp":
					if m.TLS == nil || m.TLS.CA == "" || m.TLS.Cert == "" || m.TLS.Key == "" {
						t.Fatalf("accepted a tcp manager without TLS files: %+v", m)
					}
				case "ssh":
					if m.SSH == nil || m.SSH.Key == "" || m.SSH.KnownHosts == "" {
						t.Fatalf("accepted an ssh manager without its key or known_hosts: %+v", m)
					}
				default:
					t.Fatalf("accepted manager host %q", m.Host)
				}
			}
		}
	})
}
