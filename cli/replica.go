package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/lease"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/replica"
	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/version"
	"github.com/skep-cd/skep/wire"
)

// haFlags are the settings of a replicated controller (--leader-election).
type haFlags struct {
	enabled   bool
	timings   lease.Timings
	advertise string
}

// register adds the flags of leader election to fs.
func (h *haFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&h.enabled, "leader-election", false,
		"run as one of several replicas with the same --controller-id: one leader, elected through a lease kept in the swarm, reconciles and writes; the others serve the API and take over when it goes ("+
			api.EnvPeerTokenFile+" or "+api.EnvPeerToken+" must hold the replicas' shared token)")
	fs.DurationVar(&h.timings.Duration, "lease-duration", lease.DefaultDuration,
		"how long the leader lease lasts unrenewed: a standby takes over a leader that stopped renewing after this long, and the leader writes nothing once its last renewal is three quarters of it old")
	fs.DurationVar(&h.timings.RenewDeadline, "lease-renew-deadline", lease.DefaultRenewDeadline,
		"the leader steps down (stops every write) when it could not renew the lease for this long")
	fs.DurationVar(&h.timings.Retry, "lease-retry", lease.DefaultRetry, "how often the leader renews the lease and a standby reads it")
	fs.StringVar(&h.advertise, "advertise-addr", "",
		"host:port the other replicas reach this one's API at (default: $"+EnvAdvertiseAddr+", else the host name and the port of --listen)")
}

// candidate is this process as the lease names it: its advertised
// address as its name, and an id no other process has, restarts included.
func (h *haFlags) candidate(listen string) (lease.Candidate, error) {
	addr := h.advertise
	if addr == "" {
		_, port, err := net.SplitHostPort(listen)
		if err != nil || port == "" || port == "0" {
			return lease.Candidate{}, usageError("--advertise-addr: give it when --listen %q has no fixed port", listen)
		}
		host, err := os.Hostname()
		if err != nil {
			return lease.Candidate{}, fmt.Errorf("advertise address: %w", err)
		}
		addr = net.JoinHostPort(host, port)
	} else if _, _, err := net.SplitHostPort(addr); err != nil {
		return lease.Candidate{}, usageError("--advertise-addr: want host:port, got %q", addr)
	}
	nonce := make([]byte, 4)
	if _, err := rand.Read(nonce); err != nil {
		return lease.Candidate{}, fmt.Errorf("replica id: %w", err)
	}
	return lease.Candidate{ID: addr + "/" + hex.EncodeToString(nonce), Name: addr, Addr: addr, Version: version.Get().Version}, nil
}

// peerSpec is the API token the replicas share: read from the
// environment, required with --leader-election, accepted as a viewer
// named replica.PeerName.
func peerSpec() (api.TokenSpec, wire.Token, error) {
	token, ok, err := api.PeerTokenFromEnv(os.Getenv)
	switch {
	case err != nil:
		return api.TokenSpec{}, wire.Token{}, err
	case !ok:
		return api.TokenSpec{}, wire.Token{}, fmt.Errorf("--leader-election needs the replicas' shared token: set %s (a file holding it) or %s",
			api.EnvPeerTokenFile, api.EnvPeerToken)
	}
	return api.TokenSpec{Name: replica.PeerName, Role: api.RoleViewer, Digest: token.Digest()}, token, nil
}

// runReplica runs this process as one replica of a replicated controller:
// the API and the event stream all along, the controller only for the
// terms this replica leads, each built anew as a restarted controller
// would be, its every write fenced by the lease, its events by the same.
func runReplica(ctx context.Context, flags *controllerFlags, srv *serving, srvOpts api.Options, tm term) error {
	logger, h := srv.logger, srv.history
	self, err := flags.ha.candidate(srv.opts.listen)
	if err != nil {
		return err
	}
	local, err := flags.localSwarm()
	if err != nil {
		return err
	}
	// A client of its own: renewals never wait behind the reconcile's writes.
	engine, err := swarm.Connect(ctx, swarm.Options{Destination: local})
	if err != nil {
		return err
	}
	defer engine.Close()
	elector, err := lease.New(lease.Options{Store: lease.Config{Engine: engine, Controller: flags.controllerID}, Self: self,
		Timings: flags.ha.timings, Events: h.recorder.Recorded, Logger: logger})
	if err != nil {
		return usageError("%v", err)
	}
	peer, err := peerOf(srv.certs)
	if err != nil {
		return err
	}
	var rep *replica.Replica
	tm.current = replica.NewCurrent(flags.controllerID, func() error { return rep.Ready() })
	lead := func(ctx context.Context, t lease.Term) error {
		return tm.lead(ctx, flags, srv, t, elector)
	}
	ropts := replica.Options{Elector: elector, Lead: lead, Recorder: h.recorder, Publish: h.broker, Peer: peer, Logger: logger}
	if h.db != nil {
		ropts.Store = h.db
	}
	if rep, err = replica.New(ropts); err != nil {
		return err
	}
	srvOpts.Reconciler, srvOpts.Reviews, srvOpts.Replication = tm.current, tm.current, rep.Status
	if srv.api, err = api.New(srvOpts); err != nil {
		return err
	}
	srv.handler = rep.Front(srv.api)
	if err := addLeaderGauges(srv.metrics, self, elector); err != nil {
		return err
	}
	logger.Info("leader election on", "replica", self.Name, "lease", lease.ConfigName(flags.controllerID),
		"duration", elector.Timings().Duration, "renew_deadline", elector.Timings().RenewDeadline, "retry", elector.Timings().Retry)
	return srv.run(ctx, flags.controllerID, rep.Run)
}

// term is what each term a replica leads is built from: the process's
// notifiers (each fenced for the term), the outbound ones a pull request's
// plan posts to, the previews' look-up and the answering reconciler to
// point at the term's controller.
type term struct {
	notifier *notify.Registry
	outbound []notify.Notifier
	previews *previewLookup
	apiOpts  *apiFlags
	current  *replica.Current
}

// lead runs the controller of term t until ctx ends: built anew, as a
// controller restarted on this data would be, with every write and every
// event fenced by the lease, and the plans of pull requests beside it.
func (tm term) lead(ctx context.Context, flags *controllerFlags, srv *serving, t lease.Term, elector *lease.Elector) error {
	logger, db := srv.logger, srv.history.db
	fence := func() error { return elector.Fence(t.Number) }
	if db != nil {
		closeInterrupted(ctx, logger, db, "the last leader stopped before the sync ended")
	}
	var fenced notify.Registry
	for _, n := range tm.notifier.Notifiers() {
		fenced.Register(replica.Fenced(n, fence))
	}
	ctrl, git, closeEngine, err := flags.buildWith(ctx, logger, &fenced, running{observer: srv.metrics, live: true, fence: fence, term: t.Number})
	if err != nil {
		return err
	}
	defer closeEngine()
	reviews, err := newReviews(ctrl, git, flags, tm.apiOpts, tm.outbound, logger)
	if err != nil {
		return err
	}
	if db != nil {
		seedLastSyncs(ctx, logger, ctrl, db)
	}
	tm.previews.ctrl.Store(ctrl)
	tm.current.Set(api.NewController(ctrl), reviews)
	defer func() {
		tm.current.Clear()
		tm.previews.ctrl.Store(nil)
	}()
	var wg sync.WaitGroup
	wg.Go(func() { reviews.Run(ctx) })
	defer wg.Wait()
	return ctrl.Run(ctx)
}

// addLeaderGauges exports who leads: skep_leader (1 on the leader) and
// the lease's term.
func addLeaderGauges(m *api.Metrics, self lease.Candidate, e *lease.Elector) error {
	return m.AddGauges(
		api.Gauge{Name: "skep_leader", Help: "1 while this replica holds the leader lease, 0 while it stands by.",
			Labels: map[string]string{"replica": self.Name}, Read: func() float64 {
				if e.Observed().Leading {
					return 1
				}
				return 0
			}},
		api.Gauge{Name: "skep_leader_term", Help: "The leader lease's term as this replica last read it; it rises by one at each take-over.",
			Read: func() float64 { return float64(e.Observed().Term) }},
	)
}

// peerOf is how this replica reaches the others: over TLS when the API
// serves it, trusting a peer that presents this replica's own key (the
// replicas of one service share one certificate), and with the replicas'
// token (peerSpec), which the API's tokens accept.
func peerOf(certs *api.CertReloader) (replica.Peer, error) {
	_, token, err := peerSpec()
	if err != nil {
		return replica.Peer{}, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 2 * time.Minute
	peer := replica.Peer{Scheme: "http", Transport: tr, Token: token}
	if certs == nil {
		return peer, nil
	}
	peer.Scheme = "https"
	tr.TLSClientConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The peer is named by an address the lease holds, which no
		// certificate lists: its certificate is checked below instead.
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyPeerCertificate
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return samePublicKey(certs, raw)
		},
	}
	return peer, nil
}

// samePublicKey checks that the leaf of raw has this replica's own
// certificate's public key.
func samePublicKey(certs *api.CertReloader, raw [][]byte) error {
	if len(raw) == 0 {
		return errors.New("replica presented no certificate")
	}
	peer, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return fmt.Errorf("replica certificate: %w", err)
	}
	own, err := certs.GetCertificate(nil)
	if err != nil || own == nil || len(own.Certificate) == 0 {
		return fmt.Errorf("own certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(own.Certificate[0])
	if err != nil {
		return fmt.Errorf("own certificate: %w", err)
	}
	if !bytes.Equal(peer.RawSubjectPublicKeyInfo, leaf.RawSubjectPublicKeyInfo) {
		return errors.New("replica presented a certificate for another key than this replica's")
	}
	return nil
}
