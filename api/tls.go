package api

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// CertReloader serves a certificate from a cert and key file pair and
// re-reads them when either file's modification time changes, so a renewed
// certificate is picked up without a restart. A pair that fails to load
// keeps the last good one in use. It is safe for concurrent use.
type CertReloader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	certMod time.Time
	keyMod  time.Time
	checked time.Time
	// interval bounds how often the files are stat'ed: GetCertificate runs
	// on every TLS handshake.
	interval time.Duration
}

// NewCertReloader loads the pair once; an error here is fatal to start-up.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile, interval: time.Second}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the pair; r.mu is held or r is not shared yet.
func (r *CertReloader) load() error {
	cm, km, err := r.mtimes()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls certificate %s with key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certMod, r.keyMod = &cert, cm, km
	return nil
}

// mtimes returns the modification times of the certificate and key files.
func (r *CertReloader) mtimes() (cert, key time.Time, err error) {
	ci, err := os.Stat(r.certFile)
	if err != nil {
		return cert, key, fmt.Errorf("tls certificate: %w", err)
	}
	ki, err := os.Stat(r.keyFile)
	if err != nil {
		return cert, key, fmt.Errorf("tls key: %w", err)
	}
	return ci.ModTime(), ki.ModTime(), nil
}

// GetCertificate implements tls.Config.GetCertificate. It stats the files
// at most once a second and reloads when either changed.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= r.interval {
		r.checked = now
		if cm, km, err := r.mtimes(); err == nil && (!cm.Equal(r.certMod) || !km.Equal(r.keyMod)) {
			// A half-written pair fails to load; the old certificate stays
			// until the next check finds both files consistent.
			_ = r.load()
		}
	}
	return r.cert, nil
}

// TLSConfig returns a server configuration using r, TLS 1.2 at least (the
// oldest version without known practical attacks). The caller may change
// the returned config.
func (r *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}
