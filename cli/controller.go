package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/swarm"
)

// EnvGitCredentialsFile names the git credentials file (see gitsource).
const EnvGitCredentialsFile = "SKEP_GIT_CREDENTIALS_FILE"

// controllerFlags are the process settings shared by `controller` and `deploy`.
type controllerFlags struct {
	config         string
	appsetRepo     string
	appsetRevision string
	appsetPath     string
	appsetDir      string
	appsetInterval time.Duration
	data           string
	controllerID   string
	logFormat      string
	logLevel       string
}

func (f *controllerFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "app-set file (applications.yaml)")
	fs.StringVar(&f.appsetRepo, "appset-repo", "", "git repository holding the app set")
	fs.StringVar(&f.appsetRevision, "appset-revision", appset.DefaultRevision, "branch, tag or commit of --appset-repo")
	fs.StringVar(&f.appsetPath, "appset-path", ".", "directory (or file) in --appset-repo holding the app set")
	fs.StringVar(&f.appsetDir, "appset-dir", "", "directory of app-set files")
	fs.DurationVar(&f.appsetInterval, "appset-interval", reconcile.DefaultAppSetInterval, "how often the app set is re-read")
	fs.StringVar(&f.data, "data", "/var/lib/skep", "data directory (git clones, store)")
	fs.StringVar(&f.controllerID, "controller-id", "default", "id stamped in ownership labels; two controllers on one swarm need different ids")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// logger builds the process's one slog handler and makes it the default.
func (f *controllerFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
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
	slog.SetDefault(logger)
	return logger, nil
}

// source picks the one app-set source the flags name.
func (f *controllerFlags) source(git *gitsource.Cache) (appset.Source, string, error) {
	var named []string
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
			fmt.Sprintf("git %s at %s, path %s", gitsource.RedactURL(f.appsetRepo), f.appsetRevision, f.appsetPath), nil
	}
}

// build wires a controller from the flags: git cache, swarm client,
// notifiers. The returned close releases the swarm client.
func (f *controllerFlags) build(ctx context.Context, logger *slog.Logger, notifier *notify.Registry) (*reconcile.Controller, func(), error) {
	var creds *gitsource.Credentials
	if path := os.Getenv(EnvGitCredentialsFile); path != "" {
		var err error
		if creds, err = gitsource.LoadCredentials(path); err != nil {
			return nil, nil, err
		}
	}
	git, err := gitsource.New(gitsource.Options{Dir: filepath.Join(f.data, "git"), Credentials: creds, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("git cache in %s: %w", f.data, err)
	}
	source, describe, err := f.source(git)
	if err != nil {
		return nil, nil, err
	}
	engine, err := swarm.Connect(ctx, swarm.Options{})
	if err != nil {
		return nil, nil, err
	}
	ctrl, err := reconcile.New(reconcile.Options{
		ControllerID:   f.controllerID,
		AppSet:         source,
		AppSetName:     describe,
		AppSetInterval: f.appsetInterval,
		Git:            git,
		Engine:         engine,
		Notifier:       notifier,
		Logger:         logger,
	})
	if err != nil {
		_ = engine.Close()
		return nil, nil, err
	}
	return ctrl, func() { _ = engine.Close() }, nil
}

func newControllerCommand() *cobra.Command {
	var flags controllerFlags
	var listen string
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the controller: keep the swarm at what git declares",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := flags.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var notifier notify.Registry
			notifier.Register(notify.NewLog(logger))
			ctrl, closeEngine, err := flags.build(cmd.Context(), logger, &notifier)
			if err != nil {
				return err
			}
			defer closeEngine()
			notifier.LogActive(logger)
			return serveController(cmd.Context(), logger, ctrl, listen)
		},
	}
	flags.register(cmd.Flags())
	cmd.Flags().StringVar(&listen, "listen", ":8080", "address for /healthz and /readyz")
	return cmd
}

// serveController runs the controller and its health endpoints until ctx
// ends, then drains the workers before shutting the listener.
func serveController(ctx context.Context, logger *slog.Logger, ctrl *reconcile.Controller, listen string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ctrl.Loaded() {
			http.Error(w, "app set not loaded yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("controller started", "controller", ctrl.ID(), "listen", ln.Addr().String())

	runErr := ctrl.Run(ctx) // returns once ctx ends and the workers drained
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		logger.Warn("http shutdown", "err", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", listen, err)
	}
	logger.Info("controller stopped", "controller", ctrl.ID())
	return runErr
}
