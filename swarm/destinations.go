package swarm

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/configfile"
)

// DestinationsAPIVersion and DestinationsKind are what a destinations file
// declares.
const (
	DestinationsAPIVersion = "skep/v1"
	DestinationsKind       = "Destinations"
)

// Local is the name of the swarm the controller runs in. It needs no entry
// in a destinations file and may not have one.
const Local = ""

// Destination is one named swarm and how to reach its managers.
type Destination struct {
	// Name is what applications write in destination.swarm.
	Name string
	// Managers are tried in order; the first that answers serves until it
	// stops answering. The local swarm has none (DOCKER_HOST or the default
	// socket alone) unless LocalDestination gave it fallbacks.
	Managers []Manager
}

// Manager is one way to reach one manager node's Engine API.
type Manager struct {
	// Host is unix:///path, tcp://host:port (TLS required) or
	// ssh://user@host[:port][/path/to/docker.sock].
	Host string
	// TLS holds the PEM files for a tcp host: the CA that signed the
	// engine's certificate and the client's certificate and key.
	TLS *TLSFiles
	// SSH holds the files for an ssh host: the client's private key and
	// the known_hosts file the engine's host key is checked against.
	SSH *SSHFiles
}

// TLSFiles name the PEM files of a mutual-TLS connection.
type TLSFiles struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// SSHFiles name the private key and known_hosts of an ssh connection.
type SSHFiles struct {
	Key        string `yaml:"key"`
	KnownHosts string `yaml:"knownHosts"`
}

// Scheme is the transport of m: "unix", "tcp", "ssh", or "" for the
// local default.
func (m Manager) Scheme() string {
	if m.Host == "" {
		return ""
	}
	u, err := url.Parse(m.Host)
	if err != nil {
		return ""
	}
	return u.Scheme
}

// destinationsDoc is the file's shape, as configfile decodes it.
type destinationsDoc struct {
	APIVersion   string           `yaml:"apiVersion"`
	Kind         string           `yaml:"kind"`
	Destinations []destinationDoc `yaml:"destinations"`
}

type destinationDoc struct {
	Name     string       `yaml:"name"`
	Managers []managerDoc `yaml:"managers"`
}

type managerDoc struct {
	Host string    `yaml:"host"`
	TLS  *TLSFiles `yaml:"tls"`
	SSH  *SSHFiles `yaml:"ssh"`
}

// destinationName is what a destination may be called: it labels metrics
// and objects, so it is short and plain.
var destinationName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// destinationsExample ends the message for a file of the wrong shape.
const destinationsExample = `apiVersion: skep/v1
kind: Destinations
destinations:
  - name: production
    managers:
      - host: tcp://10.0.0.10:2376
        tls: {ca: /etc/skep/prod/ca.pem, cert: /etc/skep/prod/cert.pem, key: /etc/skep/prod/key.pem}
      - host: ssh://deploy@10.0.0.11
        ssh: {key: /etc/skep/prod/id_ed25519, knownHosts: /etc/skep/prod/known_hosts}`

// ParseDestinations validates a destinations file read from name and
// returns its destinations by name. It reports every problem at once, as
// configfile.Problems, and reads none of the files it names (CheckFiles
// does).
func ParseDestinations(name string, data []byte) (map[string]Destination, error) {
	var doc destinationsDoc
	d := configfile.Decode(name, data, &doc, configfile.Options{
		Want: "a mapping with apiVersion, kind and destinations", Example: destinationsExample, HideValues: true})
	if d.Empty() {
		d.Add("", "empty; want apiVersion, kind and destinations")
		return nil, d.Err()
	}
	if doc.APIVersion != DestinationsAPIVersion {
		d.Add("apiVersion", "want %s, got %q", DestinationsAPIVersion, doc.APIVersion)
	}
	if doc.Kind != DestinationsKind {
		d.Add("kind", "want %s, got %q", DestinationsKind, doc.Kind)
	}
	out := map[string]Destination{}
	for i, dd := range doc.Destinations {
		field := fmt.Sprintf("destinations[%d]", i)
		switch {
		case dd.Name == Local:
			d.Add(field+".name", `missing; "" is the swarm the controller runs in and takes no entry`)
		case !destinationName.MatchString(dd.Name):
			d.Add(field+".name", "want lower-case letters, digits and '-' (at most 63), got %q", dd.Name)
		case out[dd.Name].Name != "":
			d.Add(field+".name", "%q is defined twice", dd.Name)
		}
		if len(dd.Managers) == 0 {
			d.Add(field+".managers", "missing; want at least one manager")
		}
		dest := Destination{Name: dd.Name}
		for j, m := range dd.Managers {
			mf := fmt.Sprintf("%s.managers[%d]", field, j)
			checkManagerDoc(d, mf, m)
			dest.Managers = append(dest.Managers, Manager(m))
		}
		if dd.Name != "" {
			out[dd.Name] = dest
		}
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkManagerDoc records in d what is wrong with the manager at field.
func checkManagerDoc(d *configfile.Document, field string, m managerDoc) {
	u, err := url.Parse(m.Host)
	if m.Host == "" || err != nil || u.Scheme == "" {
		d.Add(field+".host", "want unix:///path, tcp://host:port or ssh://user@host[:port], got %q", m.Host)
		return
	}
	switch u.Scheme {
	case "unix":
		if u.Path == "" {
			d.Add(field+".host", "want unix:///absolute/path/to/docker.sock, got %q", m.Host)
		}
		if m.TLS != nil || m.SSH != nil {
			d.Add(field, "a unix socket takes neither tls nor ssh")
		}
	case "tcp":
		if u.Hostname() == "" || u.Port() == "" {
			d.Add(field+".host", "want tcp://host:port, got %q", m.Host)
		}
		// A swarm manager's API is root on every node: never in clear text.
		if m.TLS == nil {
			d.Add(field+".tls", "missing; a tcp host needs tls: {ca, cert, key} (the Engine API is never reached in clear text)")
		} else {
			for _, f := range []struct{ name, path string }{{"ca", m.TLS.CA}, {"cert", m.TLS.Cert}, {"key", m.TLS.Key}} {
				if f.path == "" {
					d.Add(field+".tls."+f.name, "missing; want the path of a PEM file")
				}
			}
		}
		if m.SSH != nil {
			d.Add(field+".ssh", "a tcp host takes tls, not ssh")
		}
	case "ssh":
		if u.User.Username() == "" || u.Hostname() == "" {
			d.Add(field+".host", "want ssh://user@host[:port], got %q", m.Host)
		}
		// The host key is always checked: without a known_hosts file the
		// first answer would be trusted blindly.
		if m.SSH == nil {
			d.Add(field+".ssh", "missing; an ssh host needs ssh: {key, knownHosts}")
		} else {
			if m.SSH.Key == "" {
				d.Add(field+".ssh.key", "missing; want the path of the private key")
			}
			if m.SSH.KnownHosts == "" {
				d.Add(field+".ssh.knownHosts", "missing; want the path of a known_hosts file holding the host's key")
			}
		}
		if m.TLS != nil {
			d.Add(field+".tls", "an ssh host takes ssh, not tls")
		}
	default:
		d.Add(field+".host", "scheme %q: want unix, tcp or ssh", u.Scheme)
	}
}

// LoadDestinations reads, parses and checks the destinations file at path:
// ParseDestinations, then CheckFiles on every destination.
func LoadDestinations(path string) (map[string]Destination, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("destinations file: %w", err)
	}
	dests, err := ParseDestinations(path, data)
	if err != nil {
		return nil, err
	}
	for _, name := range SortedNames(dests) {
		if err := dests[name].CheckFiles(); err != nil {
			return nil, err
		}
	}
	return dests, nil
}

// CheckFiles reads every file d names and checks it holds what it should
// (PEM certificates, a key pair that matches, a known_hosts entry for the
// host), so a wrong file is reported at start, naming the destination,
// rather than at the first connection.
func (d Destination) CheckFiles() error {
	for i, m := range d.Managers {
		var err error
		switch {
		case m.TLS != nil:
			_, err = tlsConfig(m)
		case m.SSH != nil:
			err = checkSSHFiles(m)
		}
		if err != nil {
			return fmt.Errorf("destination %q, manager %d (%s): %w", d.Name, i, m.Host, err)
		}
	}
	return nil
}

// SortedNames returns the names of dests in order.
func SortedNames(dests map[string]Destination) []string {
	names := make([]string, 0, len(dests))
	for n := range dests {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Describe names a destination for messages: `swarm "x"`, or "the local
// swarm" for "".
func Describe(name string) string {
	if name == Local {
		return "the local swarm"
	}
	return fmt.Sprintf("swarm %q", name)
}

// Known lists the destination names an application may use, "" first, for
// the error that refuses an unknown one.
func Known(dests map[string]Destination) string {
	names := append([]string{`""`}, SortedNames(dests)...)
	return strings.Join(names, ", ")
}

// LocalDestination is the local swarm with fallback managers: the engine
// that DOCKER_HOST names (the default socket without it) first, then each
// of fallbacks in order, as a named destination's managers are tried.
// getenv reads the environment (os.Getenv). A host is unix:///path or
// tcp://host:port; a tcp one, DOCKER_HOST's included, uses the TLS files
// of DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem), since the Engine API is
// never reached in clear text. Without fallbacks it returns the zero
// Destination, which New reads as DOCKER_HOST alone, as before.
func LocalDestination(getenv func(string) string, fallbacks []string) (Destination, error) {
	if len(fallbacks) == 0 {
		return Destination{}, nil
	}
	primary := getenv(client.EnvOverrideHost)
	if primary == "" {
		primary = client.DefaultDockerHost
	}
	dest := Destination{Name: Local}
	var problems []error
	for i, host := range append([]string{primary}, fallbacks...) {
		what := "DOCKER_HOST"
		if i > 0 {
			what = fmt.Sprintf("local manager %d", i)
		}
		m, err := localManager(getenv, strings.TrimSpace(host))
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", what, err))
			continue
		}
		dest.Managers = append(dest.Managers, m)
	}
	if err := errors.Join(problems...); err != nil {
		return Destination{}, fmt.Errorf("the local swarm's managers: %w", err)
	}
	return dest, nil
}

// localManager reads one of the local swarm's manager addresses.
func localManager(getenv func(string) string, host string) (Manager, error) {
	u, err := url.Parse(host)
	switch {
	case err != nil:
	case u.Scheme == "unix" && u.Path != "":
		return Manager{Host: host}, nil
	case u.Scheme == "tcp" && u.Hostname() != "" && u.Port() != "":
		dir := getenv(client.EnvOverrideCertPath)
		if dir == "" {
			return Manager{}, fmt.Errorf("host %q: a tcp manager needs TLS: set %s to a directory holding ca.pem, cert.pem and key.pem", host, client.EnvOverrideCertPath)
		}
		return Manager{Host: host, TLS: &TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}}, nil
	}
	return Manager{}, fmt.Errorf("want unix:///path or tcp://host:port, got %q", host)
}
