package swarm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/docker/cli/cli/connhelper"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// dialTimeout bounds one attempt to reach one manager, TLS handshake
// included, so a dead manager delays its fallback by no more than this.
const dialTimeout = 5 * time.Second

// endpoint is one manager with its dialer.
type endpoint struct {
	host string
	dial func(ctx context.Context) (net.Conn, error)
}

// failover dials a destination's managers in order, starting with the one
// that answered last, so a working manager keeps serving and a dead one
// costs one timeout. Every connection of the destination's client goes
// through it, the events stream included.
type failover struct {
	dest      string
	endpoints []endpoint
	last      atomic.Int32 // index of the endpoint that answered last
	// failed is the error of the last dial when it failed, nil after a
	// success: the Docker client replaces a refused connection by a
	// generic message, and the operator needs to see which manager said what.
	failed atomic.Pointer[error]
}

// lastError returns the error of the last dial, nil when it succeeded.
func (f *failover) lastError() error {
	if p := f.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// dial implements the Docker client's DialContext; the address the client
// asks for is a placeholder, the endpoints know where to go.
func (f *failover) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	start := int(f.last.Load())
	var errs []error
	for i := range f.endpoints {
		k := (start + i) % len(f.endpoints)
		e := f.endpoints[k]
		actx, cancel := context.WithTimeout(ctx, dialTimeout)
		conn, err := e.dial(actx)
		cancel()
		if err == nil {
			f.last.Store(int32(k))
			f.failed.Store(nil)
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", e.host, err))
		if ctx.Err() != nil {
			break
		}
	}
	err := fmt.Errorf("no manager answered: %w", errors.Join(errs...))
	f.failed.Store(&err)
	return nil, err
}

// newEndpoint builds the dialer of one manager. It reads the manager's
// files, so a missing or malformed one fails here.
func newEndpoint(m Manager) (endpoint, error) {
	u, err := url.Parse(m.Host)
	if err != nil {
		return endpoint{}, fmt.Errorf("host %q: %w", m.Host, err)
	}
	switch u.Scheme {
	case "unix":
		path := u.Path
		return endpoint{host: m.Host, dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}, nil
	case "tcp":
		cfg, err := tlsConfig(m)
		if err != nil {
			return endpoint{}, err
		}
		addr := u.Host
		return endpoint{host: m.Host, dial: func(ctx context.Context) (net.Conn, error) {
			d := tls.Dialer{Config: cfg}
			return d.DialContext(ctx, "tcp", addr)
		}}, nil
	case "ssh":
		if err := checkSSHFiles(m); err != nil {
			return endpoint{}, err
		}
		helper, err := connhelper.GetConnectionHelperWithSSHOpts(m.Host, sshFlags(m.SSH))
		if err != nil {
			return endpoint{}, fmt.Errorf("host %q: %w", m.Host, err)
		}
		return endpoint{host: m.Host, dial: func(ctx context.Context) (net.Conn, error) {
			return helper.Dialer(ctx, "tcp", "")
		}}, nil
	}
	return endpoint{}, fmt.Errorf("host %q: scheme %q: want unix, tcp or ssh", m.Host, u.Scheme)
}

// sshFlags make the ssh client use only the given key and known_hosts:
// no user or system configuration, no agent, no prompt, and a host whose
// key is not in the file is refused, never added.
func sshFlags(f *SSHFiles) []string {
	return []string{
		"-F", "/dev/null",
		"-i", f.Key,
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + f.KnownHosts,
		"-o", "GlobalKnownHostsFile=/dev/null",
	}
}

// tlsConfig builds the mutual-TLS client configuration of a tcp manager:
// the engine's certificate must chain to the CA and name the host.
func tlsConfig(m Manager) (*tls.Config, error) {
	u, err := url.Parse(m.Host)
	if err != nil {
		return nil, fmt.Errorf("host %q: %w", m.Host, err)
	}
	if m.TLS == nil {
		return nil, errors.New("a tcp host needs tls: {ca, cert, key}")
	}
	pem, err := os.ReadFile(m.TLS.CA)
	if err != nil {
		return nil, fmt.Errorf("tls.ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls.ca: %s holds no PEM certificate", m.TLS.CA)
	}
	pair, err := tls.LoadX509KeyPair(m.TLS.Cert, m.TLS.Key)
	if err != nil {
		return nil, fmt.Errorf("tls.cert and tls.key: %w", err)
	}
	return &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{pair},
		ServerName:   u.Hostname(),
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// checkSSHFiles checks that an ssh manager's key is readable and that its
// known_hosts file parses and holds a key for the host, so a missing entry
// is reported at start and not as a refused connection later.
func checkSSHFiles(m Manager) error {
	u, err := url.Parse(m.Host)
	if err != nil {
		return fmt.Errorf("host %q: %w", m.Host, err)
	}
	if m.SSH == nil {
		return errors.New("an ssh host needs ssh: {key, knownHosts}")
	}
	if _, err := os.Stat(m.SSH.Key); err != nil {
		return fmt.Errorf("ssh.key: %w", err)
	}
	check, err := knownhosts.New(m.SSH.KnownHosts)
	if err != nil {
		return fmt.Errorf("ssh.knownHosts: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = "22"
	}
	// A key no entry can match tells "host known" (KeyError with Want)
	// from "host unknown" (no Want) without a connection.
	addr := &net.TCPAddr{IP: net.IPv4zero}
	var keyErr *knownhosts.KeyError
	err = check(net.JoinHostPort(u.Hostname(), port), addr, probeKey{})
	if errors.As(err, &keyErr) && len(keyErr.Want) == 0 {
		return fmt.Errorf("ssh.knownHosts: %s has no key for %s; add the host's key (ssh-keyscan, checked out of band)", m.SSH.KnownHosts, knownhosts.Normalize(net.JoinHostPort(u.Hostname(), port)))
	}
	return nil
}

// IsTrustError reports whether err says the peer could not be trusted (a
// certificate that does not verify, an ssh host key that is unknown or
// changed), as opposed to a peer that did not answer. A trust failure is a
// configuration problem and will not go away by retrying.
func IsTrustError(err error) bool {
	if err == nil {
		return false
	}
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
	)
	if errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify) {
		return true
	}
	msg := err.Error()
	// ssh reports these on its stderr, which the connection helper
	// carries into the error.
	for _, s := range []string{"Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED", "No ED25519 host key is known", "host key is not known", "tls: bad certificate", "certificate required", "unknown certificate authority"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// probeKey is a public key no known_hosts entry holds, for asking a
// known_hosts file whether it knows a host at all.
type probeKey struct{}

func (probeKey) Type() string    { return "skep-probe" }
func (probeKey) Marshal() []byte { return []byte("skep-probe") }
func (probeKey) Verify(_ []byte, _ *ssh.Signature) error {
	return errors.New("probe key verifies nothing")
}

// sshTrustError shortens what ssh printed when it refused a host key (a
// screenful of warnings) to the line that says why, keeping the words
// IsTrustError looks for. Other errors are returned as they are.
func sshTrustError(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "Host key verification failed") {
		return err
	}
	why := "the host's key is not in the known_hosts file"
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "Host key for ") || strings.HasPrefix(line, "No ") && strings.Contains(line, "host key is known") {
			why = line
			break
		}
	}
	return fmt.Errorf("ssh: Host key verification failed: %s", why)
}
