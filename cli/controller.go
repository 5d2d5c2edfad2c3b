package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/chartrepo"
	"github.com/skep-cd/skep/egress"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/identity"
	"github.com/skep-cd/skep/lease"
	"github.com/skep-cd/skep/memtrim"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/review"
	"github.com/skep-cd/skep/sops"
	"github.com/skep-cd/skep/store"
	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/ui"
	"github.com/skep-cd/skep/version"
	"github.com/skep-cd/skep/wire"
)

// EnvGitCredentialsFile names the git credentials file (see gitsource).
// The variable names a file rather than holding credentials, so they can
// be a mounted Docker secret and never show in `docker service inspect`;
// gitsource.LoadCredentials documents the file's format.
const EnvGitCredentialsFile = "SKEP_GIT_CREDENTIALS_FILE"

// EnvAgeIdentityFile names the age identity file that decrypts
// SOPS-encrypted files in git when --age-identity is not given. Like the
// flag, it names a file: the key itself never sits in a flag or variable.
const EnvAgeIdentityFile = "SKEP_AGE_IDENTITY_FILE"

// controllerFlags are the process settings shared by `controller` and `deploy`.
type controllerFlags struct {
	// App-set sources: exactly one of config, appsetRepo and appsetDir is
	// set (see source); appsetRevision and appsetPath refine appsetRepo.
	config         string
	appsetRepo     string
	appsetRevision string
	appsetPath     string
	appsetDir      string
	appsetInterval time.Duration
	parallelWrites int
	// gitTimeout bounds one git remote call (gitsource.Options.Timeout).
	gitTimeout time.Duration
	// gitMaxFileMiB caps one file a fetch may receive
	// (gitsource.Options.MaxFileBytes), in MiB.
	gitMaxFileMiB int64
	// data holds the git cache and the event store; it outlives restarts.
	data string
	// controllerID is stamped in every ownership label. Prune deletes only
	// what carries its own id, which is how two controllers share a swarm.
	controllerID string
	// destinations names the file of the swarms besides the local one.
	destinations string
	// localManagers lists the local swarm's other managers, tried in
	// order after DOCKER_HOST (swarm.LocalDestination).
	localManagers string
	// ageIdentity names the age identity file (see ageKeys).
	ageIdentity string
	logFormat   string
	logLevel    string
	// allowPrivateHosts lists the internal addresses (CIDR prefixes) that
	// hosts named in git may resolve to; see package egress.
	allowPrivateHosts string
	// Controller only (see registerController).
	prune         bool
	ownStack      string
	notifications string
	ha            haFlags
	rebalance     bool
}

// registerController adds the flags only a long-running controller takes.
func (f *controllerFlags) registerController(fs *pflag.FlagSet) {
	fs.BoolVar(&f.prune, "prune", false, "remove the releases of applications that left the app set (proved by ownership labels and revisions)")
	fs.StringVar(&f.ownStack, "own-stack", "", "the stack the controller itself runs in; never pruned")
	fs.StringVar(&f.notifications, "notifications", "", "YAML file of outbound notifiers (webhooks, chat, e-mail) and their routing")
	f.ha.register(fs)
	fs.BoolVar(&f.rebalance, "rebalance", false, "once a drained or lost node is back, roll the services whose tasks sit unevenly on the nodes, for every application that does not say otherwise (rebalance: false)")
}

// register adds the flags that `controller` and `deploy` share.
func (f *controllerFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "app-set file (applications.yaml)")
	fs.StringVar(&f.appsetRepo, "appset-repo", "", "git repository holding the app set")
	fs.StringVar(&f.appsetRevision, "appset-revision", appset.DefaultRevision, "branch, tag or commit of --appset-repo")
	fs.StringVar(&f.appsetPath, "appset-path", ".", "directory (or file) in --appset-repo holding the app set")
	fs.StringVar(&f.appsetDir, "appset-dir", "", "directory of app-set files")
	fs.DurationVar(&f.appsetInterval, "appset-interval", reconcile.DefaultAppSetInterval, "how often the app set is re-read")
	fs.IntVar(&f.parallelWrites, "parallel-writes", reconcile.DefaultParallelWrites,
		"writes (service, network, config and secret creates, updates and removes) in flight on one swarm at once; the others wait their turn")
	fs.DurationVar(&f.gitTimeout, "git-timeout", gitsource.DefaultTimeout, "bound of one git ls-remote or fetch; a git host that does not answer within it fails the reconcile as transient")
	fs.Int64Var(&f.gitMaxFileMiB, "git-max-file-mib", gitsource.DefaultMaxFileBytes>>20,
		"cap in MiB on one file in a git repository (in any commit fetched), which is what one fetch holds in memory; a repository with a larger file is refused as stalled")
	fs.StringVar(&f.data, "data", "/var/lib/skep", "data directory (git clones, store)")
	fs.StringVar(&f.controllerID, "controller-id", "default", "id stamped in ownership labels; two controllers on one swarm need different ids")
	fs.StringVar(&f.destinations, "destinations", "", "YAML file of the swarms besides the local one (managers over unix, TCP with TLS or ssh)")
	fs.StringVar(&f.localManagers, "local-managers", "",
		"other managers of the local swarm (comma-separated unix:///path or tcp://host:port, a tcp one with the TLS files of $DOCKER_CERT_PATH), tried in order when the engine of $DOCKER_HOST stops answering")
	fs.StringVar(&f.ageIdentity, "age-identity", "", "age identity file that decrypts SOPS-encrypted files in git (default: the file $"+EnvAgeIdentityFile+" names)")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.allowPrivateHosts, "allow-private-hosts", egress.DefaultAllow,
		"internal addresses (CIDR prefixes, comma-separated) that git repositories, image registries, chart repositories and webhook and forge notifiers may resolve to, redirects included; "+
			"link-local, unspecified, multicast and any internal address not listed are refused (\"\" refuses every internal address)")
}

// logger builds the process's one slog handler and makes it the default.
func (f *controllerFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	// slog.Level also accepts "warn+2" and the like; the message names only
	// the four an operator should use.
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, usageError("--log-level: want debug, info, warn or error, got %q", f.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch f.logFormat {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, usageError("--log-format: want text or json, got %q", f.logFormat)
	}
	logger := slog.New(h)
	// Libraries that log through slog's default (and log.Printf, which
	// SetDefault redirects) must land in the same stream as Skep's own lines.
	slog.SetDefault(logger)
	return logger, nil
}

// source picks the one app-set source the flags name.
func (f *controllerFlags) source(git *gitsource.Cache) (appset.Source, string, error) {
	var named []string
	// Every named source is collected, not just the first, so the error
	// can name them all at once.
	for flag, v := range map[string]string{"--config": f.config, "--appset-repo": f.appsetRepo, "--appset-dir": f.appsetDir} {
		if v != "" {
			named = append(named, flag)
		}
	}
	switch {
	case len(named) == 0:
		return nil, "", usageError("no app set: give --config FILE, --appset-dir DIR or --appset-repo URL")
	case len(named) > 1:
		return nil, "", usageError("give one app-set source, not %s", strings.Join(named, " and "))
	case f.config != "":
		return appset.FileSource{Path: f.config}, "file " + f.config, nil
	case f.appsetDir != "":
		return appset.DirSource{Dir: f.appsetDir}, "directory " + f.appsetDir, nil
	default:
		return reconcile.GitAppSet{Git: git, Repo: f.appsetRepo, Revision: f.appsetRevision, Path: f.appsetPath},
			// The description reaches logs and the status API: strip any
			// credentials embedded in the URL.
			fmt.Sprintf("git %s at %s, path %s", gitsource.RedactURL(f.appsetRepo), f.appsetRevision, f.appsetPath), nil
	}
}

// build wires a controller from the flags: git cache, swarm client,
// notifiers. The returned close releases the swarm client.
func (f *controllerFlags) build(ctx context.Context, logger *slog.Logger, notifier *notify.Registry) (*reconcile.Controller, func(), error) {
	ctrl, _, closeAll, err := f.buildWith(ctx, logger, notifier, running{})
	return ctrl, closeAll, err
}

// running is what a long-running controller is built with besides the
// flags: an observer of every reconcile (the metrics); live, the swarm's
// live snapshot (health, live drift, the write gate and prune need it,
// and the controller runs it); and, for a replica's term, the fence every
// write asks and the term its revisions record.
type running struct {
	observer reconcile.Observer
	live     bool
	fence    func() error
	term     int64
}

// buildWith is build for a controller that runs (see running). It also
// returns the git cache the controller reads with, which pull requests'
// plans share.
func (f *controllerFlags) buildWith(ctx context.Context, logger *slog.Logger, notifier *notify.Registry, run running) (*reconcile.Controller, *gitsource.Cache, func(), error) {
	observer, live := run.observer, run.live
	var creds *gitsource.Credentials
	if path := os.Getenv(EnvGitCredentialsFile); path != "" {
		var err error
		if creds, err = gitsource.LoadCredentials(path); err != nil {
			return nil, nil, nil, err
		}
	}
	if f.gitTimeout <= 0 {
		return nil, nil, nil, usageError("--git-timeout: want a positive duration, got %s", f.gitTimeout)
	}
	if f.gitMaxFileMiB <= 0 || f.gitMaxFileMiB > 1<<20 {
		return nil, nil, nil, usageError("--git-max-file-mib: want a number of MiB from 1 to 1048576, got %d", f.gitMaxFileMiB)
	}
	if f.parallelWrites <= 0 {
		return nil, nil, nil, usageError("--parallel-writes: want a positive number, got %d", f.parallelWrites)
	}
	policy, err := f.egress()
	if err != nil {
		return nil, nil, nil, err
	}
	git, err := gitsource.New(gitsource.Options{Dir: filepath.Join(f.data, "git"), Credentials: creds, Logger: logger, Timeout: f.gitTimeout,
		CheckHost: policy.CheckHost, DialContext: policy.Dialer().DialContext, MaxFileBytes: f.gitMaxFileMiB << 20})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("git cache in %s: %w", f.data, err)
	}
	source, describe, err := f.source(git)
	if err != nil {
		return nil, nil, nil, err
	}
	keys, err := ageKeys(f.ageIdentity)
	if err != nil {
		return nil, nil, nil, err
	}
	if keys != nil {
		logger.Info("age identity loaded", "recipients", strings.Join(keys.Recipients(), ","))
	}
	// Charts from chart repositories are cached, by digest, beside the git
	// cache; every cache read checks the digest again.
	charts, err := chartrepo.New(chartrepo.Options{Dir: filepath.Join(f.data, "charts"), Logger: logger,
		DialContext: policy.Dialer().DialContext})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("chart cache in %s: %w", f.data, err)
	}
	local, err := f.localSwarm()
	if err != nil {
		return nil, nil, nil, err
	}
	engine, err := swarm.Connect(ctx, swarm.Options{Destination: local})
	if err != nil {
		return nil, nil, nil, err
	}
	remotes, err := f.remotes(ctx, logger)
	if err != nil {
		_ = engine.Close()
		return nil, nil, nil, err
	}
	self := findSelf(ctx, engine, logger)
	closeAll := func() {
		// Runs at exit, after the work is done: a failed close changes no
		// result, but an operator may want to know a socket misbehaved.
		for _, c := range append([]*swarm.Client{engine}, remotes...) {
			if err := c.Close(); err != nil {
				logger.Warn("swarm client close", "swarm", c.Destination, "err", err)
			}
		}
	}
	// Only the controller's Run runs watchers; deploy makes one pass and
	// exits, so it gets none.
	own := reconcile.Remote{Engine: engine}
	if live {
		own.Live = swarm.NewWatcher(engine, swarm.WatcherOptions{Logger: logger, IgnoreConfig: lease.IsConfig})
	}
	byName := map[string]reconcile.Remote{}
	for _, r := range remotes {
		rr := reconcile.Remote{Engine: r}
		if live {
			rr.Live = swarm.NewWatcher(r, swarm.WatcherOptions{Logger: logger.With("swarm", r.Destination), IgnoreConfig: lease.IsConfig})
		}
		byName[r.Destination] = rr
	}
	if _, ok := byName[swarm.Local]; ok {
		closeAll()
		return nil, nil, nil, errors.New(`destinations: "" names the controller's own swarm; give the other swarms names`)
	}
	byName[swarm.Local] = own
	ctrl, err := reconcile.New(reconcile.Options{
		PruneApplications: f.prune,
		OwnStack:          f.ownStack,
		Self:              self,
		ControllerID:      f.controllerID,
		AppSet:            source,
		AppSetName:        describe,
		AppSetInterval:    f.appsetInterval,
		Git:               git,
		ParallelWrites:    f.parallelWrites,
		Notifier:          notifier,
		Logger:            logger,
		Observer:          observer,
		Charts:            charts,
		Images:            artifact.NewRegistry(artifact.RegistryOptions{Transport: policy.Transport()}),
		Destinations:      byName,
		Keys:              keys,
		// The Engine connects where a log driver or a network volume
		// says: those hosts come from git too.
		CheckAddress: policy.CheckHost,
		Fence:        run.fence,
		Term:         run.term,
		Rebalance:    f.rebalance,
		// So do the Prometheus and web addresses of canaries' analyses.
		Analysis: &http.Client{Transport: policy.Transport()},
	})
	if err != nil {
		// The construction error is the one to report; a failure to close
		// a client nobody used would only hide it.
		closeAll()
		return nil, nil, nil, err
	}
	return ctrl, git, closeAll, nil
}

// localSwarm is the swarm the controller runs in: the engine of
// DOCKER_HOST (or the default socket), then its fallback managers, as a
// named destination's are tried.
func (f *controllerFlags) localSwarm() (swarm.Destination, error) {
	var fallbacks []string
	if f.localManagers != "" {
		fallbacks = strings.Split(f.localManagers, ",")
	}
	local, err := swarm.LocalDestination(os.Getenv, fallbacks)
	if err != nil {
		return swarm.Destination{}, usageError("--local-managers: %v", err)
	}
	return local, nil
}

// egress is the policy every outbound HTTP client of the controller dials
// through. Hosts named in git (repositories, registries, chart
// repositories) are chosen by whoever can commit, and any host may
// redirect; internal addresses need allowing.
func (f *controllerFlags) egress() (egress.Policy, error) {
	policy, err := egress.Parse(f.allowPrivateHosts)
	if err != nil {
		return egress.Policy{}, usageError("--allow-private-hosts: %v", err)
	}
	return policy, nil
}

// outbound builds the notifiers of the --notifications file; none without
// one.
func (f *controllerFlags) outbound(logger *slog.Logger, previews notify.PreviewLookup) ([]notify.Notifier, error) {
	if f.notifications == "" {
		return nil, nil
	}
	cfg, err := notify.LoadConfig(f.notifications)
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: err}
	}
	policy, err := f.egress()
	if err != nil {
		return nil, err
	}
	outbound, err := notify.BuildOptions{Logger: logger, Previews: previews, Transport: policy.Transport()}.Build(cfg)
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("notifications: %w", err)}
	}
	return outbound, nil
}

// ageKeys loads the age identities SOPS-encrypted files are decrypted
// with: the file flag names, else the file EnvAgeIdentityFile names, else
// none (nil; a release using an encrypted file then fails naming it). A
// file that is named but unreadable or holds no identity stops the start.
func ageKeys(flag string) (*sops.Keys, error) {
	file := cmp.Or(flag, os.Getenv(EnvAgeIdentityFile))
	if file == "" {
		return nil, nil
	}
	return sops.LoadKeys(file)
}

// apiFlags are the controller's API settings. Tokens and webhook secrets
// never come from flags: the files named here point at files or variables.
// The zero value is no usable configuration; register sets the defaults.
type apiFlags struct {
	listen        string
	metricsListen string
	tokensFile    string
	webhooksFile  string
	oidcFile      string
	tlsCert       string
	tlsKey        string
	uiURL         string
}

// register adds the API's flags to fs.
func (f *apiFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "listen", ":8080", "address of the API, /healthz, /readyz and /metrics (admins); $"+EnvListen+" when not given")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "also serve /metrics without authentication on this address (keep it private)")
	fs.StringVar(&f.tokensFile, "tokens-file", "", "YAML file whose tokens key lists API tokens (name, role, apps, tokenFile|tokenEnv|sha256), "+
		"like tokens: [{name: ci, role: deployer, tokenFile: /run/secrets/ci}]; "+
		api.EnvAdminTokenFile+" or "+api.EnvAdminToken+" add a token named admin")
	fs.StringVar(&f.webhooksFile, "webhooks-file", "", "YAML file of inbound webhook providers and their secrets (secretFile|secretEnv)")
	fs.StringVar(&f.oidcFile, "oidc-file", "", "YAML file of OpenID Connect sign-in (signIn: the UI and skep login, groups mapped to roles) "+
		"and the CI issuers whose ID tokens jobs present (ci: claims mapped to roles); its secrets come from files or the environment")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this certificate file (re-read when it changes)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "key file of --tls-cert")
	fs.StringVar(&f.uiURL, "ui-url", "", "where people open this controller's UI (https://skep.example.org); pull requests' plan comments and statuses link there")
}

// oidc loads the --oidc-file; nil without one.
func (f *apiFlags) oidc() (*identity.Config, error) {
	if f.oidcFile == "" {
		return nil, nil
	}
	cfg, err := identity.LoadFile(f.oidcFile, os.Getenv)
	if err != nil {
		return nil, err
	}
	return &cfg, nil
}

// authorizer builds the token authorizer, with the tokens of extra (the
// replicas' own) besides; with no token of people or jobs at all and no
// OIDC file (oidc false) the controller refuses to start, since its API
// could otherwise not be used safely.
func (f *apiFlags) authorizer(logger *slog.Logger, oidc bool, extra ...api.TokenSpec) (*api.Tokens, error) {
	var specs []api.TokenSpec
	if admin, ok, err := api.AdminTokenFromEnv(os.Getenv); err != nil {
		return nil, err
	} else if ok {
		specs = append(specs, admin)
	}
	if f.tokensFile != "" {
		more, err := api.LoadTokensFile(f.tokensFile, os.Getenv)
		if err != nil {
			return nil, err
		}
		specs = append(specs, more...)
	}
	// An API without tokens would either be open or unusable. Refuse to
	// start, so that a missing secret mount is seen at deploy time.
	if len(specs) == 0 && !oidc {
		return nil, fmt.Errorf("no API token configured: set %s (a file holding the admin token) or %s, or give --tokens-file or --oidc-file",
			api.EnvAdminTokenFile, api.EnvAdminToken)
	}
	specs = append(specs, extra...)
	tokens, err := api.NewTokens(specs...)
	if err != nil {
		return nil, fmt.Errorf("api tokens: %w", err)
	}
	// Names only: the tokens themselves never reach a log.
	logger.Info("api tokens loaded", "names", tokens.Names())
	return tokens, nil
}

// webhooks loads the inbound webhook providers. Without --webhooks-file it
// returns nil, nil: the API then answers every provider 404, and the
// controller reads git only on its own schedule.
func (f *apiFlags) webhooks() (*api.Webhooks, error) {
	if f.webhooksFile == "" {
		return nil, nil
	}
	specs, err := api.LoadWebhooksFile(f.webhooksFile, os.Getenv)
	if err != nil {
		return nil, err
	}
	return api.NewWebhooks(specs, api.WebhooksOptions{})
}

// newControllerCommand builds `skep controller`, the long-running process.
// It blocks until the command's context ends (SIGINT or SIGTERM in main).
func newControllerCommand() *cobra.Command {
	var flags controllerFlags
	var apiOpts apiFlags
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the controller: keep the swarm at what git declares, serve the API",
		Long: "controller reconciles the app set and serves the HTTP API on --listen.\n" +
			"It refuses to start without credentials: set " + api.EnvAdminTokenFile + " (or " + api.EnvAdminToken + ")\n" +
			"or give --tokens-file or --oidc-file.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd.Flags(), os.LookupEnv); err != nil {
				return err
			}
			logger, err := flags.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			// Checked before any token or file is read, so a usage error is reported
			// as one (exit 2) and not hidden behind a failure to load something else.
			if (apiOpts.tlsCert == "") != (apiOpts.tlsKey == "") {
				return usageError("--tls-cert and --tls-key go together")
			}
			if u, err := url.Parse(apiOpts.uiURL); apiOpts.uiURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil) {
				return usageError("--ui-url: want an absolute http or https URL without credentials, got %q", apiOpts.uiURL)
			}
			oidc, err := apiOpts.oidc()
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			var extra []api.TokenSpec
			if flags.ha.enabled {
				peer, _, err := peerSpec()
				if err != nil {
					return &ExitError{Code: ExitFailure, Err: err}
				}
				extra = append(extra, peer)
			}
			tokens, err := apiOpts.authorizer(logger, oidc != nil, extra...)
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			hooks, err := apiOpts.webhooks()
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			return runController(cmd.Context(), logger, &flags, &apiOpts, credentials{tokens: tokens, oidc: oidc}, hooks)
		},
	}
	flags.register(cmd.Flags())
	flags.registerController(cmd.Flags())
	apiOpts.register(cmd.Flags())
	return cmd
}

// Environment variables that stand for a controller flag not given. A
// swarm service's environment can hold Swarm's templates ({{.Task.Slot}})
// where its command cannot: the replicas of one service on one host each
// listen on a port of their own this way.
const (
	EnvListen        = "SKEP_LISTEN"
	EnvAdvertiseAddr = "SKEP_ADVERTISE_ADDR"
)

// flagsFromEnv sets each of --listen and --advertise-addr that the command
// line leaves out from its environment variable, when set.
func flagsFromEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	for name, env := range map[string]string{"listen": EnvListen, "advertise-addr": EnvAdvertiseAddr} {
		v, ok := lookup(env)
		if !ok || fs.Changed(name) {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return usageError("%s: %v", env, err)
		}
	}
	return nil
}

// credentials are what the API takes: the tokens file's (and the admin
// token's), and the OIDC file's identities, when one is given.
type credentials struct {
	tokens *api.Tokens
	oidc   *identity.Config
}

// history is the controller's record of events: the store (nil when it
// could not be opened, and then state says why), the broker of the event
// stream and the recorder that numbers events into both.
type history struct {
	db       *store.Store
	state    wire.StoreStatus
	broker   *notify.Broker
	recorder *notify.Recorder
}

// status is the store's state for the status route.
func (h *history) status() wire.StoreStatus {
	st := h.state
	if h.db != nil {
		st.FailedWrites = int64(h.recorder.Stats().Failed)
	}
	return st
}

// openHistory opens the store in the data directory and builds the broker
// and the recorder over it. A store that cannot be opened loses history,
// never safety: the controller runs on, and events are still streamed live
// (see openStore and docs/operations.md, "The history store").
func openHistory(ctx context.Context, logger *slog.Logger, data string) *history {
	h := &history{}
	h.db, h.state = openStore(ctx, logger, filepath.Join(data, store.FileName))
	var lastID int64
	if h.db != nil {
		// New event ids must stay above every id already kept, or a client
		// resuming a stream by id would skip events. Unreadable, the
		// recorder's clock floor still keeps ids growing (see notify.Recorder).
		var err error
		if lastID, err = h.db.LastID(ctx); err != nil {
			logger.Warn("store last id unreadable", "err", err)
		}
		closeInterrupted(ctx, logger, h.db, "the controller stopped before the sync ended")
	}
	h.broker = notify.NewBroker(notify.BrokerOptions{Logger: logger})
	recOpts := notify.RecorderOptions{Publish: h.broker, LastID: lastID, Logger: logger}
	if h.db != nil {
		recOpts.Store = h.db
	}
	h.recorder = notify.NewRecorder(recOpts)
	return h
}

// closeInterrupted closes the syncs the store still has running: the
// controller that ran them stopped (or, for a replica taking over, the
// last leader did) before they ended.
func closeInterrupted(ctx context.Context, logger *slog.Logger, db *store.Store, why string) {
	if n, err := db.CloseRunning(ctx, time.Now(), why); err != nil {
		logger.Warn("store running syncs not closed", "err", err)
	} else if n > 0 {
		logger.Info("syncs left running closed as interrupted", "count", n, "why", why)
	}
}

// runController wires the store, the event stream, the metrics, the
// controller and the API, and runs them until ctx ends. Shutdown follows
// one path: the workers drain, the event streams close, the servers shut
// down, the recorder drains, the store closes. With --leader-election
// the controller runs only while this replica leads (see runReplica).
func runController(ctx context.Context, logger *slog.Logger, flags *controllerFlags, apiOpts *apiFlags, creds credentials, hooks *api.Webhooks) error {
	var certs *api.CertReloader
	if apiOpts.tlsCert != "" {
		var err error
		if certs, err = api.NewCertReloader(apiOpts.tlsCert, apiOpts.tlsKey); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
	}
	if err := os.MkdirAll(flags.data, 0o755); err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("data directory: %w", err)}
	}
	trimMemory(ctx, logger)
	h := openHistory(ctx, logger, flags.data)
	if h.db != nil {
		defer h.db.Close()
	}

	var notifier notify.Registry
	var previews previewLookup
	notifier.Register(notify.NewLog(logger))
	notifier.Register(h.recorder)
	// The forge notifier asks the controller which syncs are previews;
	// the controller is built after the notifiers, so the lookup is bound
	// to it once it exists.
	outbound, err := flags.outbound(logger, &previews)
	if err != nil {
		return err
	}
	for _, n := range outbound {
		notifier.Register(n)
	}

	// The metrics are built before the controller (the controller reports to
	// them), so they read it through previews' pointer once it is set; a
	// scrape in between (or on a standby) sees no applications.
	metrics := newMetrics(&previews.ctrl)
	if err := registerCounters(metrics, &previews.ctrl, &notifier, h.broker); err != nil {
		return err
	}
	// Logged after the counters are in place, so that the list an operator
	// reads at start-up is the list that is counted.
	notifier.LogActive(logger)

	webUI, err := ui.New()
	if err != nil {
		return err
	}
	srvOpts := api.Options{
		Notifiers: notifier.Names, Authorizer: creds.tokens, Metrics: metrics, Webhooks: hooks,
		Broker: h.broker, UI: webUI, Logger: logger, Store: h.status,
	}
	if creds.oidc != nil {
		id, err := newIdentity(ctx, logger, *creds.oidc, h.db)
		if err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		srvOpts.Authorizer = append(api.Chain{creds.tokens}, id.Authorizers()...)
		if id.SignIn != nil {
			srvOpts.SignIn = id.SignIn
		}
	}
	if h.db != nil {
		// Without a store the API still serves, but has no history to answer
		// event lists and sync history from.
		srvOpts.EventLog, srvOpts.Syncs = h.db, h.db
	}
	srv := serving{logger: logger, metrics: metrics, opts: apiOpts, certs: certs, runners: notifier.Notifiers(), history: h}
	if flags.ha.enabled {
		return runReplica(ctx, flags, &srv, srvOpts, term{notifier: &notifier, outbound: outbound, previews: &previews, apiOpts: apiOpts})
	}
	ctrl, git, closeEngine, err := flags.buildWith(ctx, logger, &notifier, running{observer: metrics, live: true})
	if err != nil {
		return err
	}
	previews.ctrl.Store(ctrl)
	defer closeEngine()
	if h.db != nil {
		seedLastSyncs(ctx, logger, ctrl, h.db)
	}
	if srv.reviews, err = newReviews(ctrl, git, flags, apiOpts, outbound, logger); err != nil {
		return err
	}
	srvOpts.Reconciler, srvOpts.Reviews = api.NewController(ctrl), srv.reviews
	if srv.api, err = api.New(srvOpts); err != nil {
		return err
	}
	srv.handler = srv.api
	// The notifier set is copied: registration is over, and the runners must
	// not see a set that changes under them.
	return srv.run(ctx, ctrl.ID(), ctrl.Run)
}

// newMetrics builds the metrics, whose application and swarm gauges read
// the controller ctrl points at when scraped (none while it is nil).
func newMetrics(ctrl *atomic.Pointer[reconcile.Controller]) *api.Metrics {
	return api.NewMetrics(api.MetricsOptions{
		Applications: func() []api.AppState {
			c := ctrl.Load()
			if c == nil {
				return nil
			}
			var out []api.AppState
			for _, st := range c.Statuses().List() {
				as := api.AppState{Name: st.Name, Swarm: st.Swarm, Sync: string(st.Sync),
					// An application not yet assessed has no health; the gauge needs a
					// value, and "unknown" is the honest one.
					Health: cmp.Or(string(st.Health), wire.HealthUnknown), DriftFindings: len(st.Findings)}
				for _, o := range st.Artifacts {
					if as.Artifacts == nil {
						as.Artifacts = map[string]string{}
					}
					as.Artifacts[o.Entry.Name] = api.ArtifactView(o).Drift
				}
				out = append(out, as)
			}
			return out
		},
		Swarms: func() []api.SwarmState {
			c := ctrl.Load()
			if c == nil {
				return nil
			}
			var out []api.SwarmState
			for _, d := range c.Destinations() {
				out = append(out, api.SwarmState{Name: d.Name, Reachable: d.Reachable})
			}
			return out
		},
		Version: version.Get().Version, Commit: version.Get().Commit,
	})
}

// newReviews plans pull requests with ctrl and git, posting to the forge
// notifiers among outbound; the app set's git source, when it is one, is
// planned at a pull request's head.
func newReviews(ctrl *reconcile.Controller, git *gitsource.Cache, flags *controllerFlags, apiOpts *apiFlags, outbound []notify.Notifier, logger *slog.Logger) (*review.Reviewer, error) {
	opts := review.Options{Controller: ctrl, Git: git, UI: apiOpts.uiURL, Logger: logger}
	if flags.appsetRepo != "" {
		opts.AppSet = &review.AppSet{Repo: flags.appsetRepo, Revision: flags.appsetRevision, Path: flags.appsetPath}
	}
	for _, n := range outbound {
		if f, ok := n.(*notify.Forge); ok {
			opts.Forges = append(opts.Forges, f)
		}
	}
	return review.New(opts)
}

// newIdentity builds the OIDC file's identities over the store's
// sessions (none without a store: the browser sign-in then answers 503)
// and asks each provider for its discovery document, so that a wrong
// issuer shows in the start-up log. A provider that does not answer yet
// is no reason not to start: it is asked again when needed.
func newIdentity(ctx context.Context, logger *slog.Logger, cfg identity.Config, db *store.Store) (*identity.Identity, error) {
	opts := identity.Options{Config: cfg, Logger: logger}
	if db != nil {
		opts.Sessions = db
	} else if cfg.SignIn != nil {
		logger.Error("oidc sign-in needs the history store, which is not open; browsers cannot sign in")
	}
	id, err := identity.New(opts)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := id.Discover(dctx); err != nil {
		logger.Warn("oidc provider not discovered; asked again at its first use", "err", err)
	}
	attrs := []any{"issuers", id.Issuers()}
	if cfg.SignIn != nil {
		attrs = append(attrs, "sign_in", cfg.SignIn.Issuer, "cli", cfg.SignIn.CLIClientID != "",
			"session_lifetime", cfg.SignIn.SessionLifetime, "sessions_outlive_restart", !cfg.SignIn.SessionKey.Empty())
	}
	logger.Info("oidc identities loaded", attrs...)
	return id, nil
}

// seedLastSyncs gives each application the last sync the store recorded,
// so that a restarted controller still says when each was last synced and
// by whom. Unreadable, the applications show none until their next sync:
// the store is history, never safety.
func seedLastSyncs(ctx context.Context, logger *slog.Logger, ctrl *reconcile.Controller, db *store.Store) {
	last, err := db.LastSucceeded(ctx)
	if err != nil {
		logger.Warn("store last syncs unreadable; applications show none until they sync", "err", err)
		return
	}
	seeds := make(map[string]reconcile.LastSync, len(last))
	for _, s := range last {
		seeds[s.Application] = reconcile.LastSync{At: s.Finished, Revision: s.Revision, Actor: s.Actor}
	}
	ctrl.Statuses().SeedLastSyncs(seeds)
}

// openStore opens the history store at path. A corrupt database is moved
// aside, kept for inspection, and a new one started: history from now on
// is worth more than a controller that keeps nothing. Any other failure
// (a file it may not open, a schema from a newer skep) leaves the file
// alone and the controller without a store. Either way it is logged at
// error level and the returned state says so on the status route.
func openStore(ctx context.Context, logger *slog.Logger, path string) (*store.Store, wire.StoreStatus) {
	st := wire.StoreStatus{Path: path}
	db, err := store.Open(ctx, path, store.Options{Logger: logger})
	if errors.Is(err, store.ErrCorrupt) {
		moved, moveErr := store.MoveAside(path, time.Now())
		if moveErr != nil {
			err = fmt.Errorf("%w; %w", err, moveErr)
		} else {
			logger.Error("store corrupt; moved aside and a new one started", "moved_to", moved, "err", err)
			st.MovedAside, st.Error = moved, err.Error()
			db, err = store.Open(ctx, path, store.Options{Logger: logger})
		}
	}
	if err != nil {
		logger.Error("store not opened; events are not kept", "err", err)
		st.Error = err.Error()
		return nil, st
	}
	st.Kept = true
	return db, st
}

// registerCounters exports counts kept by other packages: the git cache's
// remote calls, each counted notifier's deliveries, and the events lost to
// lagging stream subscribers.
func registerCounters(m *api.Metrics, ctrl *atomic.Pointer[reconcile.Controller], notifier *notify.Registry, broker *notify.Broker) error {
	git := func() gitsource.Stats {
		if c := ctrl.Load(); c != nil {
			return c.GitStats()
		}
		return gitsource.Stats{}
	}
	counters := []api.Counter{
		{Name: "skep_git_ls_remote_total", Help: "ls-remote calls made to git remotes.", Read: func() float64 { return float64(git().ListRefs) }},
		{Name: "skep_git_fetches_total", Help: "Fetches made from git remotes.", Read: func() float64 { return float64(git().Fetches) }},
		{Name: "skep_event_stream_dropped_total", Help: "Events not delivered live to a lagging stream subscriber (replayed from the store).", Read: func() float64 { return float64(broker.Dropped()) }},
	}
	for _, n := range notifier.Notifiers() {
		// Both capabilities are optional: the log notifier counts nothing, and a
		// counter needs a name for its label.
		counted, ok := n.(notify.Counted)
		named, hasName := n.(notify.Named)
		if !ok || !hasName {
			continue
		}
		labels := map[string]string{"notifier": named.Name()}
		counters = append(counters,
			api.Counter{Name: "skep_notifier_deliveries_total", Help: "Events a notifier delivered.", Labels: labels, Read: func() float64 { return float64(counted.Stats().Delivered) }},
			api.Counter{Name: "skep_notifier_failures_total", Help: "Events a notifier failed to deliver after retries.", Labels: labels, Read: func() float64 { return float64(counted.Stats().Failed) }},
			api.Counter{Name: "skep_notifier_dropped_total", Help: "Events a notifier dropped on a full queue.", Labels: labels, Read: func() float64 { return float64(counted.Stats().Dropped) }},
		)
	}
	return m.AddCounters(counters...)
}

// serving is the controller's HTTP side and the background work around
// it: the listeners, the notifiers' runners, the webhook queue, retention.
type serving struct {
	logger  *slog.Logger
	metrics *api.Metrics
	opts    *apiFlags
	certs   *api.CertReloader
	// runners are the notifiers that deliver from queues of their own.
	runners []notify.Notifier
	history *history
	api     *api.Server
	// handler serves the listener: api, or a replica's front of it.
	handler http.Handler
	// reviews plans pull requests beside the controller; nil when it
	// runs elsewhere (a replica's, for the terms it leads).
	reviews *review.Reviewer
}

// run serves the API and runs work (the controller, or a replica) until
// ctx ends. It returns work's error, or the first listener error; a
// second listener's failure to start stops the first before returning.
func (s *serving) run(ctx context.Context, id string, work func(context.Context) error) error {
	logger, metrics, opts, certs, runners, broker, db := s.logger, s.metrics, s.opts, s.certs, s.runners, s.history.broker, s.history.db
	apiServer := s.api
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("listen on %s: %w", opts.listen, err)}
	}
	srv := newHTTPServer(s.handler, logger)
	servers := []*http.Server{srv}
	var wg sync.WaitGroup
	// One slot per listener, so a failing Serve never blocks on a reader
	// that is still waiting for the controller to stop.
	serveErr := make(chan error, 2)
	serve := func(s *http.Server, l net.Listener, tls bool) {
		defer wg.Done()
		var err error
		if tls {
			err = s.ServeTLS(l, "", "")
		} else {
			err = s.Serve(l)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}
	if certs != nil {
		// ServeTLS("", "") takes the certificate from TLSConfig, which re-reads
		// it when the files change; no restart is needed to rotate it.
		srv.TLSConfig = certs.TLSConfig()
	}
	wg.Add(1)
	go serve(srv, ln, certs != nil)
	if opts.metricsListen != "" {
		mln, err := net.Listen("tcp", opts.metricsListen)
		if err != nil {
			// Already returning the listen error; srv has served nothing
			// yet, so an error closing it adds nothing the operator needs.
			_ = srv.Close()
			wg.Wait()
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("listen on %s: %w", opts.metricsListen, err)}
		}
		mux := http.NewServeMux()
		// This listener serves /metrics only and without authentication, for a
		// scraper that cannot hold a token; nothing else may be mounted here.
		mux.Handle("GET /metrics", metrics.Handler())
		msrv := newHTTPServer(mux, logger)
		servers = append(servers, msrv)
		wg.Add(1)
		go serve(msrv, mln, false)
		logger.Info("metrics listener started", "listen", mln.Addr().String())
	}

	// Background work must outlive ctx: the notifiers still deliver the
	// events of the workers' last reconciles while the workers drain. It is
	// stopped explicitly, after the servers.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var bgWG sync.WaitGroup
	bgWG.Add(2)
	// The recorder and the outbound notifiers deliver from their queues.
	// They return nil when bg ends, so an error here is a notifier that
	// stopped delivering early: events after it are lost, which must show.
	go func() {
		defer bgWG.Done()
		if err := notify.RunAll(bg, runners); err != nil {
			logger.Error("notifier stopped", "err", err)
		}
	}()
	go func() { defer bgWG.Done(); apiServer.Run(bg) }()
	if s.reviews != nil {
		// Pull requests are planned one at a time beside the workers, never
		// in their way: a plan takes no worker and writes nothing.
		bgWG.Add(1)
		go func() { defer bgWG.Done(); s.reviews.Run(bg) }()
	}
	if db != nil {
		bgWG.Add(1)
		go func() {
			defer bgWG.Done()
			if err := db.RunRetention(bg, 0); err != nil {
				logger.Error("store retention stopped", "err", err)
			}
		}()
	}
	logger.Info("controller started", "controller", id, "listen", ln.Addr().String(), "tls", certs != nil)

	runErr := work(ctx) // returns once ctx ends and the workers drained
	broker.Close()      // ends event streams, which Shutdown would wait for
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(shutdown); err != nil {
			logger.Warn("http shutdown", "err", err)
		}
	}
	wg.Wait()
	// Only now, with no request left in flight, may the background work stop.
	stopBackground()
	bgWG.Wait()
	select {
	// A listener that failed while running is reported over ctrl's error: it
	// is why the API was unreachable.
	case err := <-serveErr:
		return fmt.Errorf("serve %s: %w", opts.listen, err)
	default:
	}
	logger.Info("controller stopped", "controller", id)
	return runErr
}

// newHTTPServer applies the timeouts every listener shares. The write
// timeout bounds ordinary answers; the event stream lifts it for itself.
func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// previewLookup answers forge notifiers from the controller once it is
// built: the notifiers are made before it, since it is handed them.
type previewLookup struct {
	ctrl atomic.Pointer[reconcile.Controller]
}

// Preview implements notify.PreviewLookup.
func (p *previewLookup) Preview(_ context.Context, app, commit string) (notify.PreviewInfo, bool) {
	c := p.ctrl.Load()
	if c == nil {
		return notify.PreviewInfo{}, false
	}
	branch, domain, ok := c.PreviewAt(app, commit)
	// Forges name branches without refs/heads/; a pull-request ref stays
	// whole, and the forge notifier finds no branch of that name, which is
	// right: its pull request is the ref itself.
	return notify.PreviewInfo{Branch: strings.TrimPrefix(branch, "refs/heads/"), Domain: domain}, ok
}

// findSelf looks up the swarm service this controller runs as, which the
// app set's self application deploys. Not finding one is no error: the
// controller may run outside the swarm, and a self application then
// stalls saying so.
func findSelf(ctx context.Context, engine *swarm.Client, logger *slog.Logger) swarm.Self {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	self, err := swarm.FindSelfHere(ctx, engine)
	switch {
	case err != nil:
		logger.Warn("could not tell which swarm service this controller runs as; a self application cannot deploy it", "err", err)
	case self.ServiceID == "":
		logger.Debug("this controller runs as no swarm service")
	default:
		logger.Info("controller runs as a swarm service", "service", self.ServiceName, "id", self.ServiceID, "container", self.ContainerID)
	}
	return self
}

// trimMemory keeps the resident set of a controller at rest small: the
// binary's pages that start-up touched are dropped and mapped again one
// page at a time as they run (package memtrim), the heap's headroom is
// half the live heap (GOGC=50) unless GOGC is set, and once a burst of
// work (a first deploy, a full relist, a restart's renders) is over, the
// heap's free pages go back to the kernel and the binary's pages are
// dropped again, until ctx ends. All are measured in
// docs/performance.md; none can fail the start.
func trimMemory(ctx context.Context, logger *slog.Logger) {
	if n, err := memtrim.Executable(); err != nil {
		logger.Debug("executable pages not trimmed", "err", err)
	} else {
		logger.Debug("executable pages trimmed", "mappings", n)
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(50)
	}
	go settleMemory.Run(ctx, func(t memtrim.Trim) {
		logger.Debug("memory returned after a burst of work", "allocated_mib", t.Allocated>>20, "released_mib", t.Released>>20, "executable_mappings", t.Mappings, "err", t.Err)
	})
}

// settleMemory is when a controller trims: after 64 MiB allocated, once
// a 30 s period allocates under 16 MiB. An idle controller of 1,000
// applications allocates about 4.5 MiB per 30 s, and at GOGC=50 the
// runtime collects whenever half the live heap is allocated anyway, so a
// trim's full GC adds little: one per burst or per 64 MiB, never one per
// tick.
var settleMemory = memtrim.Settle{Every: 30 * time.Second, Burst: 64 << 20, Quiet: 16 << 20}
