// Package demo shows Skep working on this machine with one command: it
// builds a demo image FROM scratch, serves an example app set from a local
// git server, runs `skep controller` against the local swarm, and walks
// through a commit that is synced and an out-of-band change that the
// controller corrects.
//
// It must clean up only what it created, and never touch anything else on
// the swarm: everything it removes carries the demo's controller id
// (ControllerID) in its ownership labels, or is an image labelled LabelDemo.
// A leftover of an earlier run is removed at start, so running it again is
// safe. Removal is by label, never by name, so a user's stack that happens
// to be called skep-demo is left alone unless its services carry that id.
//
// The demo runs the controller as a child process of the same binary,
// exactly as an operator would, so what it shows is the product and not a
// test double. It reaches Docker only through the Engine it is given.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/githttp"
	"github.com/skep-cd/skep/stack"
)

// ControllerID is the controller id the demo's controller runs under.
// It is what scopes the cleanup: removeOwned deletes only objects whose
// ownership label carries this id.
const ControllerID = "skep-demo"

// LabelDemo marks the images the demo built.
// Its value is "true"; removeImages deletes only images carrying it.
const LabelDemo = "io.skep.demo"

// Release is the stack the demo application deploys.
// Its services are named Release + "_" + service, as in a Docker stack.
const Release = "skep-demo"

// Engine is the part of the Engine API the demo uses.
// The moby client satisfies it; tests give a fake. Only the calls the demo
// makes are listed, so a fake stays small.
type Engine interface {
	ImageBuilder
	ImageRemove(ctx context.Context, image string, options image.RemoveOptions) ([]image.DeleteResponse, error)
	ServiceList(ctx context.Context, options swarm.ServiceListOptions) ([]swarm.Service, error)
	ServiceUpdate(ctx context.Context, serviceID string, version swarm.Version, service swarm.ServiceSpec, options swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error)
	ServiceRemove(ctx context.Context, serviceID string) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkRemove(ctx context.Context, network string) error
	ConfigList(ctx context.Context, options swarm.ConfigListOptions) ([]swarm.Config, error)
	ConfigRemove(ctx context.Context, id string) error
	SecretList(ctx context.Context, options swarm.SecretListOptions) ([]swarm.Secret, error)
	SecretRemove(ctx context.Context, id string) error
}

// Options shape a demo run. The zero value of each field means its default.
type Options struct {
	// Binary is the skep executable to run and to package; "" means this one.
	Binary string
	// Listen is the controller's address; default 127.0.0.1:8080.
	Listen string
	// AppPort is the host port the demo application is published on
	// (host mode); default 18080.
	AppPort int
	// ExitAfterShowcase ends the demo, cleaned up, after the showcase
	// instead of waiting for ctx to end.
	ExitAfterShowcase bool
	// Out receives what the demo tells the person running it.
	Out io.Writer
}

// withDefaults fills the zero fields of o; it fails only when "this
// binary" cannot be found.
func (o Options) withDefaults() (Options, error) {
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("find the skep binary: %w", err)
		}
		o.Binary = exe
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8080"
	}
	if o.AppPort == 0 {
		o.AppPort = 18080
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o, nil
}

// Run runs the demo until ctx ends (or after the showcase with
// ExitAfterShowcase), then removes everything it created. It returns an
// error when a showcase step did not happen.
// Run blocks; cleanup runs on every return, also after a failed step, and
// its error is joined to the result. eng must stay open until Run returns.
func Run(ctx context.Context, eng Engine, opts Options) (err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return err
	}
	// A run killed before its cleanup (SIGKILL, a reboot) leaves objects
	// behind; they carry the same id, so the first step removes them and nothing else.
	d := &run{eng: eng, opts: opts, out: opts.Out}
	if err := d.removeOwned(ctx); err != nil {
		return fmt.Errorf("remove an earlier demo's leftovers: %w", err)
	}
	defer func() {
		// ctx has usually ended by now (Ctrl-C): cleanup needs a context of its
		// own, bounded so a hung daemon cannot keep the demo from exiting.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if cerr := d.cleanup(cleanup); cerr != nil {
			err = errors.Join(err, fmt.Errorf("demo cleanup: %w", cerr))
		}
	}()
	if err := d.setUp(ctx); err != nil {
		return err
	}
	if err := d.showcase(ctx); err != nil {
		return err
	}
	if opts.ExitAfterShowcase {
		d.say("showcase done; cleaning up")
		return nil
	}
	d.keepRunning(ctx)
	return nil
}

// keepRunning tells the user how to end the demo and waits until ctx
// ends. Not an error: Ctrl-C is how the user ends a demo that keeps
// running.
// Its last line points at the web UI, where the synced commit and the
// corrected drift are seen, with the token to sign in with.
func (d *run) keepRunning(ctx context.Context) {
	d.say("the demo keeps running; press Ctrl-C to stop it and remove everything it created")
	d.say("see the sync and the drift correction in the web UI: open %s/#/app/demo and sign in with the token %s",
		baseURL(d.opts.Listen), d.token)
	<-ctx.Done()
}

// baseURL is the address a browser or the CLI on this machine reaches the
// controller listening on listen at: an address of every interface (or a
// port alone) is reached on loopback.
func baseURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// run is one demo run's state.
// Set by setUp, read by showcase and cleanup; one goroutine uses it,
// except exited, which the controller's waiter writes once.
type run struct {
	eng    Engine
	opts   Options
	out    io.Writer
	dir    string
	git    *githttp.Server
	app    *githttp.Repo
	images map[string]string // version → reference
	ctrl   *exec.Cmd
	// exited receives the controller's exit status once; buffered, so the
	// waiter never blocks when nobody is listening.
	exited chan error
	// token is the generated admin token, printed so the user can try the
	// API; it lives only as long as the demo.
	token string
}

// say tells the person running the demo what is happening, on Out.
func (d *run) say(format string, args ...any) {
	fmt.Fprintf(d.out, "skep demo: "+format+"\n", args...)
}

// setUp builds both images, starts the git server with the two
// repositories and starts the controller. What it made before failing
// is recorded in d, so cleanup removes it.
func (d *run) setUp(ctx context.Context) error {
	var err error
	if d.dir, err = os.MkdirTemp("", "skep-demo-"); err != nil {
		return err
	}
	d.images = map[string]string{}
	// Both images exist before the controller starts: the showcase's commit
	// switches to v2 and there is no registry for the swarm to pull from.
	for _, v := range []string{"v1", "v2"} {
		d.say("building demo image %s FROM scratch through the Engine API", v)
		ref, err := BuildImage(ctx, d.eng, d.opts.Binary, v)
		if err != nil {
			return err
		}
		d.images[v] = ref
	}
	gitRoot := filepath.Join(d.dir, "git")
	if err := os.MkdirAll(gitRoot, 0o755); err != nil {
		return err
	}
	if d.git, err = githttp.Start(githttp.Options{Root: gitRoot}); err != nil {
		return err
	}
	if d.app, err = d.repo(gitRoot, "demo-app", map[string]string{
		"compose.yaml": appCompose(d.opts.AppPort),
		"welcome.txt":  "Deployed by Skep from git.\n",
		".env":         "IMAGE=" + d.images["v1"] + "\n",
	}); err != nil {
		return err
	}
	if _, err := d.repo(gitRoot, "demo-apps", map[string]string{
		"applications.yaml": appSet(d.git.URL + "/demo-app.git"),
	}); err != nil {
		return err
	}
	d.say("git server with the example app set at %s/demo-apps.git", d.git.URL)
	return d.startController(ctx)
}

// repo creates a bare repository name under root, served by the git
// server, with one commit of files on main.
func (d *run) repo(root, name string, files map[string]string) (*githttp.Repo, error) {
	work := filepath.Join(d.dir, "work", name)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	repo, err := githttp.CreateRepo(root, name, work)
	if err != nil {
		return nil, err
	}
	_, err = repo.Commit("main", files)
	return repo, err
}

// startController runs `skep controller` from the same binary, with a
// fresh admin token; the process outlives ctx until cleanup stops it.
func (d *run) startController(ctx context.Context) error {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	// A random token, not a fixed one: the API listens while the demo runs,
	// and a well-known token would open it to anyone on the machine.
	d.token = hex.EncodeToString(b)
	tokenFile := filepath.Join(d.dir, "admin-token")
	// Handed over in a file, as in production; flags never carry tokens.
	if err := os.WriteFile(tokenFile, []byte(d.token+"\n"), 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(d.dir, "controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	// Not CommandContext: the controller is stopped with SIGINT in cleanup,
	// so that it drains its workers, after ctx has already ended.
	d.ctrl = exec.Command(d.opts.Binary, "controller",
		"--appset-repo", d.git.URL+"/demo-apps.git", "--appset-revision", "main",
		// Short intervals keep the showcase brisk; the defaults suit production.
		"--appset-interval", "5s", "--data", filepath.Join(d.dir, "data"),
		"--controller-id", ControllerID, "--listen", d.opts.Listen)
	d.ctrl.Env = append(os.Environ(), "SKEP_ADMIN_TOKEN_FILE="+tokenFile)
	d.ctrl.Stdout, d.ctrl.Stderr = logFile, logFile
	// On a failed start the start error is the one to report: the log file
	// holds nothing, so an error closing it is dropped.
	if err := d.ctrl.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start skep controller: %w", err)
	}
	d.exited = make(chan error, 1)
	// The waiter owns logFile after a successful start: the child writes to
	// it until it exits, so it is closed only then. A failed close loses
	// nothing the user needs, since the file is read, if at all, later.
	go func() {
		d.exited <- d.ctrl.Wait()
		_ = logFile.Close()
	}()
	d.say("controller running (id %s), its log: %s", ControllerID, logPath)
	d.say("API and web UI: %s  token: %s", baseURL(d.opts.Listen), d.token)
	d.say("try:  export SKEP_SERVER=%s SKEP_TOKEN_FILE=%s", baseURL(d.opts.Listen), tokenFile)
	d.say("      skep app list; skep app get demo; skep events --follow")
	return nil
}

// showcase walks through the three things the demo shows: a deploy, a
// commit synced, drift corrected. It returns at the first step that does
// not happen in time, naming it.
func (d *run) showcase(ctx context.Context) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/", d.opts.AppPort)
	d.say("waiting for the demo app to answer on %s", url)
	if err := d.waitVersion(ctx, url, "v1", 3*time.Minute); err != nil {
		return err
	}
	d.say("the demo app answers v1")

	// The compose file takes its image from .env (${IMAGE}), so the
	// commit that rolls out v2 changes .env alone.
	commit, err := d.app.Commit("main", map[string]string{".env": "IMAGE=" + d.images["v2"] + "\n"})
	if err != nil {
		return err
	}
	d.say("committed %s: the demo app's image is now v2; waiting for the controller to sync it", commit[:12])
	if err := d.waitVersion(ctx, url, "v2", 2*time.Minute); err != nil {
		return err
	}
	d.say("commit %s synced: the demo app answers v2", commit[:12])

	return d.showDrift(ctx)
}

// showDrift scales the demo service behind the controller's back and waits
// for the controller to put it back.
func (d *run) showDrift(ctx context.Context) error {
	svc, err := d.service(ctx)
	if err != nil {
		return err
	}
	spec := svc.Spec
	// Scaling is the out-of-band change anyone can make with `docker
	// service scale`; live drift detection must undo it.
	three := uint64(3)
	spec.Mode.Replicated.Replicas = &three
	if _, err := d.eng.ServiceUpdate(ctx, svc.ID, svc.Version, spec, swarm.ServiceUpdateOptions{}); err != nil {
		return fmt.Errorf("scale %s out of band: %w", svc.Spec.Name, err)
	}
	d.say("scaled %s to 3 replicas behind the controller's back; waiting for it to notice", svc.Spec.Name)
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
		svc, err := d.service(ctx)
		if err != nil {
			return err
		}
		if r := svc.Spec.Mode.Replicated.Replicas; r != nil && *r == 1 {
			d.say("the controller corrected the drift: %s is back at 1 replica", svc.Spec.Name)
			return nil
		}
	}
	return errors.New("the out-of-band scale was not corrected within 90s")
}

// service finds the demo's web service among those the demo owns.
func (d *run) service(ctx context.Context) (swarm.Service, error) {
	list, err := d.eng.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(
		filters.Arg("label", stack.LabelController+"="+ControllerID))})
	if err != nil {
		return swarm.Service{}, err
	}
	for _, s := range list {
		// Replicated is checked because showDrift dereferences it.
		if s.Spec.Name == Release+"_web" && s.Spec.Mode.Replicated != nil {
			return s, nil
		}
	}
	return swarm.Service{}, fmt.Errorf("service %s_web not found", Release)
}

// waitVersion polls url until the demo app answers version, the
// controller exits, ctx ends or timeout passes. The error names the last
// answer, which usually says what went wrong.
func (d *run) waitVersion(ctx context.Context, url, version string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		select {
		// A controller that died will not sync anything: fail at once and
		// point at its log rather than wait out the timeout.
		case err := <-d.exited:
			return fmt.Errorf("the controller exited (%v); see %s", err, filepath.Join(d.dir, "controller.log"))
		default:
		}
		reply, err := get(ctx, url)
		if err == nil && reply.Version == version {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = "answered " + reply.Version
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return fmt.Errorf("the demo app did not answer %s within %s: %s", version, timeout, last)
}

// get fetches and decodes the demo app's reply; each try has its own
// short deadline, so one hung connection cannot use up waitVersion's.
func get(ctx context.Context, url string) (AppReply, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return AppReply{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return AppReply{}, err
	}
	defer resp.Body.Close()
	var reply AppReply
	err = json.NewDecoder(resp.Body).Decode(&reply)
	return reply, err
}

// sleep waits d or until ctx ends, whichever is first, and returns
// ctx's error in the second case.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cleanup stops the controller, removes every object and image the demo
// created, and its directory.
func (d *run) cleanup(ctx context.Context) error {
	var errs []error
	if d.ctrl != nil && d.ctrl.Process != nil {
		// SIGINT, not Kill: the controller then drains its workers and closes
		// its store. An error means the process is gone already, which is
		// what this wants.
		_ = d.ctrl.Process.Signal(syscall.SIGINT)
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			// A controller that does not stop in time is killed; an error again
			// means it exited meanwhile. Waiting on exited reaps it either way.
			_ = d.ctrl.Process.Kill()
			<-d.exited
		}
	}
	if err := d.removeOwned(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := d.removeImages(ctx); err != nil {
		errs = append(errs, err)
	}
	if d.git != nil {
		// The git server is a listener of this process: a failed close leaves
		// nothing behind once it exits, and cleanup goes on to what would.
		_ = d.git.Close()
	}
	if d.dir != "" {
		if err := os.RemoveAll(d.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		d.say("removed everything the demo created")
	}
	return errors.Join(errs...)
}
