package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/wire"
)

// HAOptions say how to start a replicated controller.
type HAOptions struct {
	Binary string // the skep binary
	Dir    string // holds one directory per replica
	AppSet string // the app-set file
	ID     string // the controller id the replicas share, unique to the run
	// Engine is the Engine socket each replica's counting proxy forwards
	// to; Engines, when set, gives one per replica instead (taken in turn),
	// each replica then on a manager of its own.
	Engine  string
	Engines []string
	// Image is the services' image in StartDeployment; "" builds the test
	// image. Their tasks are none, so no node ever pulls it.
	Image string
	// Replicas is how many to start; default 3.
	Replicas int
	// Args are more flags for every replica (lease timings, say).
	Args     []string
	LogLevel string
}

// PeerToken is the replicas' shared token in an HA run.
const PeerToken = "bench-peer-token"

// HA is a replicated controller: Replicas `skep controller
// --leader-election` processes sharing one controller id, each on its own
// data directory and behind its own counting proxy in front of the
// Engine, so that every Engine write is known by the replica that sent it.
type HA struct {
	Replicas []*Replica
	opts     HAOptions
	pushes   int  // webhooks sent, to take the replicas in turn
	midWrite bool // Fail freezes a leader with a service write under way
}

// SlowWrites makes each replica's service writes take d at its proxy, and
// Fail freeze a leader only while one of them is under way: the leader
// stops in the middle of an apply, with the rest of it to write when it
// resumes.
func (h *HA) SlowWrites(d time.Duration) {
	for _, r := range h.Replicas {
		r.Proxy.Slow(d)
	}
	h.midWrite = d > 0
}

// Replica is one process of an HA run. Its proxy outlives restarts: the
// writes of every process that ran as this replica are in one log.
type Replica struct {
	// Name is the replica's name and advertised address; Engine the
	// socket of the manager it deploys through.
	Name   string
	Engine string
	Proxy  *Proxy
	opts   ControllerOptions

	// mu guards the process, replaced by Start, and frozen, set between
	// Freeze and Thaw: a roaming client reads them from its goroutine.
	mu     sync.Mutex
	ctl    *Controller
	frozen bool
}

// StartHA starts the replicas one after the other, each ready (its API
// answering /readyz) before the next starts, so the first one leads.
func StartHA(tb testing.TB, opts HAOptions) *HA {
	tb.Helper()
	if opts.Replicas <= 0 {
		opts.Replicas = 3
	}
	h := &HA{opts: opts}
	peerFile := filepath.Join(opts.Dir, "peer.token")
	if err := os.WriteFile(peerFile, []byte(PeerToken+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	for i := range opts.Replicas {
		dir := filepath.Join(opts.Dir, fmt.Sprintf("replica-%d", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		addr := freeAddr(tb)
		engine := opts.Engine
		if len(opts.Engines) > 0 {
			engine = opts.Engines[i%len(opts.Engines)]
		}
		r := &Replica{Name: addr, Engine: engine, Proxy: StartProxy(tb, engine)}
		r.opts = ControllerOptions{Binary: opts.Binary, Dir: dir, AppSet: opts.AppSet, ID: opts.ID, DockerHost: "unix://" + r.Proxy.Socket,
			LogLevel: opts.LogLevel, Addr: addr, Env: []string{"SKEP_PEER_TOKEN_FILE=" + peerFile},
			Args: append([]string{"--leader-election", "--advertise-addr", addr}, opts.Args...)}
		r.Start(tb)
		h.Replicas = append(h.Replicas, r)
	}
	return h
}

// Start starts the replica's process, on its data and address, and waits
// until it is ready. It is stopped (thawed first) when tb ends.
func (r *Replica) Start(tb testing.TB) {
	tb.Helper()
	ctl := StartController(tb, r.opts)
	r.mu.Lock()
	r.ctl = ctl
	r.mu.Unlock()
	r.opts.Log = true // a restart appends to the same log
	tb.Cleanup(func() {
		if r.isFrozen() {
			r.Thaw(tb)
		}
	})
}

// Controller is the replica's running process.
func (r *Replica) Controller() *Controller {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctl
}

// Kill ends the process with SIGKILL, as a crash or a node gone would.
func (r *Replica) Kill(tb testing.TB) { r.Controller().Kill(tb) }

// Stop ends the process with SIGTERM, as Swarm stopping its task does, and
// waits for it to exit.
func (r *Replica) Stop(tb testing.TB) { r.Controller().Terminate(tb, syscall.SIGTERM) }

// Freeze stops the process with SIGSTOP: a long pause of the whole process.
func (r *Replica) Freeze(tb testing.TB) {
	r.Controller().Signal(tb, syscall.SIGSTOP)
	r.mu.Lock()
	r.frozen = true
	r.mu.Unlock()
}

// Thaw resumes a frozen process with SIGCONT.
func (r *Replica) Thaw(tb testing.TB) {
	r.Controller().Signal(tb, syscall.SIGCONT)
	r.mu.Lock()
	r.frozen = false
	r.mu.Unlock()
}

// isFrozen reports whether the process is frozen.
func (r *Replica) isFrozen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.frozen
}

// Alive reports whether the replica's process runs (frozen or not).
func (r *Replica) Alive() bool {
	c := r.Controller()
	return c != nil && !c.Exited()
}

// serving reports whether the process runs and is not frozen: it answers.
func (r *Replica) serving() bool { return r.Alive() && !r.isFrozen() }

// Status asks the replica's own API for the controller's status.
func (r *Replica) Status(ctx context.Context) (wire.ControllerStatus, error) {
	var st wire.ControllerStatus
	err := r.Controller().get(ctx, "/api/v1/status", func(body io.Reader) error { return json.NewDecoder(body).Decode(&st) })
	return st, err
}

// Call sends method path to the replica's API, with the run's admin
// token when admin is set, and returns the answer's status code.
func (r *Replica) Call(ctx context.Context, method, path string, admin bool) (int, error) {
	c := r.Controller()
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, nil)
	if err != nil {
		return 0, err
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Events lists the events this replica keeps, oldest first: a standby
// answers from the history it copied.
func (r *Replica) Events(ctx context.Context) ([]wire.EventItem, error) {
	var list wire.EventList
	err := r.Controller().get(ctx, "/api/v1/events?limit=10000", func(body io.Reader) error { return json.NewDecoder(body).Decode(&list) })
	return list.Events, err
}

// Leader returns the replica that holds the lease in a term at least
// after, as the lease writes the proxies saw say, once it answers as the
// leader; nil when none does yet.
func (h *HA) Leader(ctx context.Context, after int64) *Replica {
	terms := h.Terms()
	if len(terms) == 0 {
		return nil
	}
	last := terms[len(terms)-1]
	if last.Number < after || last.Holder == nil || !last.Holder.serving() {
		return nil
	}
	st, err := last.Holder.Status(ctx)
	if err != nil || st.Replication == nil || st.Replication.Role != wire.RoleLeader || st.Replication.Term != last.Number {
		return nil
	}
	return last.Holder
}

// WaitLeader waits up to within for a leader in a term above after,
// landing flow's commits meanwhile (flow may be nil), and returns it with
// its term.
func (h *HA) WaitLeader(tb testing.TB, flow *Flow, after int64, within time.Duration) (*Replica, Term) {
	tb.Helper()
	if flow == nil {
		flow = &Flow{}
	}
	var leader *Replica
	if !flow.Until(tb, within, func() bool {
		ctx, cancel := context.WithTimeout(tb.Context(), 2*time.Second)
		defer cancel()
		leader = h.Leader(ctx, after+1)
		return leader != nil
	}) {
		tb.Fatalf("no leader in a term above %d within %s; %v", after, within, h.Terms())
	}
	terms := h.Terms()
	return leader, terms[len(terms)-1]
}

// The ways Fail ends a leader.
const (
	FailKill   = "kill"   // SIGKILL: a crash, or its node gone
	FailFreeze = "freeze" // SIGSTOP, SIGCONT once another leads: a long pause
	FailStop   = "stop"   // SIGTERM: a planned stop, an upgrade
)

// Failover is one take-over, as the proxies saw it.
type Failover struct {
	Kind     string
	From, To Term
	// At is when the signal was sent; Took is from it to the answer to the
	// write that took the lease for the next term.
	At   time.Time
	Took time.Duration
	// Resumed is from the signal to the new leader's first write other
	// than the lease's (HA.Resumed; zero until it is measured).
	Resumed time.Duration
}

// Fail ends the current leader as kind says, waits (landing flow's
// commits) for the next term, and brings the old leader back: a killed
// or stopped one is started again on its data, a frozen one thawed a
// second after the take-over, and in each case Fail returns once it
// answers as a standby.
func (h *HA) Fail(tb testing.TB, flow *Flow, kind string, within time.Duration) Failover {
	tb.Helper()
	leader, from := h.WaitLeader(tb, flow, 0, within)
	if kind == FailFreeze && h.midWrite {
		// Stopped with a service write on its way: the rest of that apply
		// would follow it once thawed, but for the fence.
		if !flow.Until(tb, within, func() bool { return leader.Proxy.InFlight() > 0 }) {
			tb.Fatalf("%s wrote no service within %s", leader.Name, within)
		}
	}
	at := time.Now()
	switch kind {
	case FailKill:
		leader.Kill(tb)
	case FailFreeze:
		leader.Freeze(tb)
	case FailStop:
		leader.Stop(tb)
	default:
		tb.Fatalf("fail %q: want kill, freeze or stop", kind)
	}
	var to Term
	if !flow.Until(tb, within, func() bool {
		terms := h.Terms()
		to = terms[len(terms)-1]
		return to.Number > from.Number
	}) {
		tb.Fatalf("no term after %v within %s of the %s", from, within, kind)
	}
	f := Failover{Kind: kind, From: from, To: to, At: at, Took: to.Taken.Sub(at)}
	if kind == FailFreeze {
		flow.Until(tb, time.Second, func() bool { return false })
		leader.Thaw(tb)
	} else {
		leader.Start(tb)
	}
	if !flow.Until(tb, within, func() bool {
		ctx, cancel := context.WithTimeout(tb.Context(), 2*time.Second)
		defer cancel()
		st, err := leader.Status(ctx)
		return err == nil && st.Replication != nil && st.Replication.Replica != leader.Name
	}) {
		tb.Fatalf("%s did not stand by within %s of the %s", leader.Name, within, kind)
	}
	return f
}

// Resumed is how long after f's signal the new leader sent its first
// write other than the lease's, within its term; zero when it wrote none.
func (h *HA) Resumed(f Failover) time.Duration {
	end := time.Now()
	for _, t := range h.Terms() {
		if t.Number == f.To.Number+1 {
			end = t.Sent
		}
	}
	for _, w := range f.To.Holder.Proxy.Writes() {
		if !h.leaseWrite(w) && !w.At.Before(f.To.Sent) && w.At.Before(end) {
			return w.At.Sub(f.At)
		}
	}
	return 0
}

// Term is one leader term as the proxies saw it: the lease write that
// took it, by whom.
type Term struct {
	Number int64
	Holder *Replica
	// Sent and Taken are when the write that took the lease was sent and
	// answered: the term began between the two.
	Sent, Taken time.Time
}

// String names the term, its holder and when it began.
func (t Term) String() string {
	name := "?"
	if t.Holder != nil {
		name = t.Holder.Name
	}
	return fmt.Sprintf("term %d by %s at %s", t.Number, name, t.Taken.Format("15:04:05.000"))
}

// Lease labels, as package lease writes them (the bench reads them off
// the wire and imports no server package).
const (
	leaseHolder = "io.skep.lease.holder"
	leaseTerm   = "io.skep.lease.term"
)

// leaseWrite reports whether w is a write of the run's lease: its name, or
// a create of a config by that name.
func (h *HA) leaseWrite(w Write) bool {
	return w.Config == "skep-lease-"+h.opts.ID || strings.Contains(w.Path, "/configs/skep-lease-"+h.opts.ID)
}

// Terms lists the terms taken so far, in order: each term's first
// successful lease write naming a holder.
func (h *HA) Terms() []Term {
	byNumber := map[int64]Term{}
	for _, r := range h.Replicas {
		for _, w := range r.Proxy.Writes() {
			if !w.OK() || !h.leaseWrite(w) || w.Labels[leaseHolder] == "" {
				continue
			}
			n, err := strconv.ParseInt(w.Labels[leaseTerm], 10, 64)
			if err != nil {
				continue
			}
			if t, seen := byNumber[n]; !seen || w.At.Before(t.Sent) {
				byNumber[n] = Term{Number: n, Holder: r, Sent: w.At, Taken: w.Done}
			}
		}
	}
	out := make([]Term, 0, len(byNumber))
	for _, t := range byNumber {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Term) int { return int(a.Number - b.Number) })
	return out
}

// LateWrite is a write a replica sent while another held the lease: what
// fencing must make impossible.
type LateWrite struct {
	By    *Replica
	Write Write
	// In is the term in force when the write was sent (nil: before any).
	In *Term
}

// String says who wrote what under whose term.
func (l LateWrite) String() string {
	in := "no term"
	if l.In != nil {
		in = l.In.String()
	}
	return fmt.Sprintf("%s %s %s (status %d) at %s, in %s", l.By.Name, l.Write.Method, l.Write.Path, l.Write.Status, l.Write.At.Format("15:04:05.000"), in)
}

// LateWrites returns every Engine write (lease writes aside) that a
// replica sent while it did not hold the term in force: a term begins
// when the write that took it was sent, so a write of the old leader
// sent after that, even one the Engine refused, is late.
func (h *HA) LateWrites() []LateWrite {
	terms := h.Terms()
	var late []LateWrite
	for _, r := range h.Replicas {
		for _, w := range r.Proxy.Writes() {
			if h.leaseWrite(w) {
				continue
			}
			var in *Term
			for i := range terms {
				if !terms[i].Sent.After(w.At) {
					in = &terms[i]
				}
			}
			if in == nil || in.Holder != r {
				late = append(late, LateWrite{By: r, Write: w, In: in})
			}
		}
	}
	return late
}

// Revisions counts, by commit, the revisions the replicas recorded (the
// revision configs the Engine accepted): a commit applied once has one.
func (h *HA) Revisions() map[string]int {
	out := map[string]int{}
	for _, r := range h.Replicas {
		for _, w := range r.Proxy.Writes() {
			if w.OK() && w.Labels["io.skep.kind"] == "revision" && strings.HasSuffix(w.Path, "/configs/create") {
				out[w.Labels["io.skep.commit"]]++
			}
		}
	}
	return out
}

// Histories is what the replicas' event histories say against each other.
type Histories struct {
	// Kept is how many events each replica keeps, by name.
	Kept map[string]int
	// Doubled lists events kept twice by one replica: an id twice, or the
	// same event under two ids.
	Doubled []string
	// Missing lists events a replica lacks that another keeps, but for
	// Orphans.
	Missing []string
	// Differs lists ids whose events differ between replicas.
	Differs []string
	// Orphans are the events only the replica that raised them kept: a
	// leader killed or frozen between keeping an event and its stream
	// reaching the standbys (a window of a millisecond or so).
	Orphans []string
	// Union is every event id any replica keeps, in order.
	Union []int64
}

// Histories reads the event history of every replica, which must all be
// running, and compares them.
func (h *HA) Histories(ctx context.Context) (Histories, error) {
	out := Histories{Kept: map[string]int{}}
	byID := map[int64]map[*Replica]wire.EventItem{}
	for _, r := range h.Replicas {
		events, err := r.Events(ctx)
		if err != nil {
			return out, fmt.Errorf("events of %s: %w", r.Name, err)
		}
		out.Kept[r.Name] = len(events)
		seen := map[string]int64{}
		var last int64
		for _, e := range events {
			if e.ID <= last {
				out.Doubled = append(out.Doubled, fmt.Sprintf("%s: id %d after %d", r.Name, e.ID, last))
			}
			last = e.ID
			key := fmt.Sprintf("%s|%s|%s|%s|%s|%d|%s", e.Application, e.Type, e.Revision, e.Message, e.Actor, e.Term, e.At.Format(time.RFC3339Nano))
			if other, dup := seen[key]; dup {
				out.Doubled = append(out.Doubled, fmt.Sprintf("%s: ids %d and %d are one %s event", r.Name, other, e.ID, e.Type))
			}
			seen[key] = e.ID
			if byID[e.ID] == nil {
				byID[e.ID] = map[*Replica]wire.EventItem{}
				out.Union = append(out.Union, e.ID)
			}
			byID[e.ID][r] = e
		}
	}
	slices.Sort(out.Union)
	terms := h.Terms()
	holder := func(term int64) *Replica {
		for _, t := range terms {
			if t.Number == term {
				return t.Holder
			}
		}
		return nil
	}
	for _, id := range out.Union {
		kept := byID[id]
		var first *wire.EventItem
		for _, e := range kept {
			if first == nil {
				first = &e
			} else if e.Event != first.Event {
				out.Differs = append(out.Differs, strconv.FormatInt(id, 10))
			}
		}
		if len(kept) == len(h.Replicas) {
			continue
		}
		if len(kept) == 1 {
			var by *Replica
			var e wire.EventItem
			for by, e = range kept {
			}
			if holder(e.Term) == by {
				out.Orphans = append(out.Orphans, fmt.Sprintf("%d (%s of %s, term %d, by %s)", id, e.Type, e.Application, e.Term, by.Name))
				continue
			}
		}
		for _, r := range h.Replicas {
			if _, ok := kept[r]; !ok {
				out.Missing = append(out.Missing, fmt.Sprintf("%s lacks %d", r.Name, id))
			}
		}
	}
	return out, nil
}

// CaughtUp waits up to within until every replica keeps the same last
// event id, and reports whether they did.
func (h *HA) CaughtUp(ctx context.Context, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		lasts := map[int64]bool{}
		for _, r := range h.Replicas {
			events, err := r.Events(ctx)
			if err != nil || len(events) == 0 {
				lasts[-1] = true
				continue
			}
			lasts[events[len(events)-1].ID] = true
		}
		if len(lasts) == 1 && !lasts[-1] {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// Push announces a push of repoURL's main branch with the generic webhook,
// to the replicas in turn (a standby forwards it to the leader), skipping
// those not running; it returns the replica's answer, an error while no
// replica leads.
func (h *HA) Push(ctx context.Context, repoURL, delivery string) error {
	h.pushes++
	for i := range h.Replicas {
		r := h.Replicas[(h.pushes+i)%len(h.Replicas)]
		if r.serving() {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return r.Controller().Webhook(ctx, repoURL, delivery)
		}
	}
	return errors.New("no replica runs")
}

// Roam follows the event stream across the replicas, as a client behind
// a load balancer would: it reads from one replica for hop, then
// reconnects to the next one running (not frozen), sending the last id it
// saw as Last-Event-ID, until ctx ends. It returns the ids it received,
// in order, once ctx ended.
func (h *HA) Roam(ctx context.Context, hop time.Duration) <-chan []int64 {
	out := make(chan []int64, 1)
	go func() {
		var ids []int64
		last := ""
		for i := 0; ctx.Err() == nil; i++ {
			r := h.Replicas[i%len(h.Replicas)]
			if !r.serving() {
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			ctl := r.Controller()
			c, err := client.New(client.Options{Server: ctl.URL, Token: wire.NewToken(ctl.token)})
			if err != nil {
				break
			}
			hopCtx, cancel := context.WithTimeout(ctx, hop)
			_ = c.Stream(hopCtx, client.EventQuery{}, last, func(e client.StreamEvent) error {
				if id, err := strconv.ParseInt(e.ID, 10, 64); err == nil {
					ids, last = append(ids, id), e.ID
				}
				return nil
			})
			cancel()
		}
		out <- ids
	}()
	return out
}

// Flow lands commits on a repository's main branch while a test or the
// soak waits for something else: one every Every, each made by Commit
// (which gets its number), all on the caller's goroutine.
type Flow struct {
	Repo   *harness.Repo
	Every  time.Duration
	Commit func(n int) map[string]string
	// Pushed, when set, is told of each commit once it landed (to send a
	// forge's push webhook).
	Pushed func(sha string)
	// Await, when set, holds the next commit back until it reports the
	// last one applied: every commit is then applied, none superseded.
	Await func(sha string) bool
	// Commits are the commits landed so far, in order.
	Commits []string
	next    time.Time
}

// Land commits now.
func (f *Flow) Land(tb testing.TB) string {
	tb.Helper()
	sha := f.Repo.Commit(tb, "main", f.Commit(len(f.Commits)+1))
	f.Commits = append(f.Commits, sha)
	f.next = time.Now().Add(f.Every)
	if f.Pushed != nil {
		f.Pushed(sha)
	}
	return sha
}

// Until lands a commit whenever one is due, until cond holds or within
// passed; it reports whether cond held.
func (f *Flow) Until(tb testing.TB, within time.Duration, cond func() bool) bool {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		if f.Every > 0 && !time.Now().Before(f.next) && (f.Await == nil || len(f.Commits) == 0 || f.Await(f.Commits[len(f.Commits)-1])) {
			f.Land(tb)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Deployment is a replicated controller deploying one application, three
// services with no task, from a git repository whose every commit changes
// all three: an apply is three service writes and a revision. Each commit
// is announced by a push webhook, to the replicas in turn (a standby
// forwards it to the leader); one that finds no leader (a take-over under
// way) is not sent again, since the next leader reads git when it starts.
type Deployment struct {
	HA   *HA
	Flow *Flow
	// Namespace is the release's stack, also the controller id.
	Namespace string
}

// StartDeployment starts a Deployment on the swarm docker reaches:
// opts.Replicas replicas (default 3) of the binary opts.Binary with
// opts.Args, each deploying through opts.Engine or opts.Engines (the local
// Engine when neither is set), and a Flow landing a commit every every
// (the first one landed). Everything it creates is removed when tb ends.
func StartDeployment(tb testing.TB, docker *dockerclient.Client, opts HAOptions, every time.Duration) *Deployment {
	tb.Helper()
	git := harness.StartGitServer(tb, harness.GitServerOptions{})
	ns := harness.Name(tb, "ha")
	harness.CleanupStack(tb, docker, ns)
	tb.Cleanup(func() {
		// The lease is the replicated controller's own record, not its
		// stack's: it goes with the run.
		_ = docker.ConfigRemove(context.WithoutCancel(tb.Context()), "skep-lease-"+ns)
	})
	image := opts.Image
	if image == "" {
		image = harness.TestImage(tb, docker, harness.ImageOptions{})
	}
	repo := git.CreateRepo(tb, "app")
	var services strings.Builder
	services.WriteString("services:\n")
	for _, name := range []string{"web", "api", "worker"} {
		fmt.Fprintf(&services, "  %s:\n    image: ${IMAGE}\n    environment: {COMMIT: \"${N}\"}\n    deploy: {replicas: 0}\n", name)
	}
	d := &Deployment{Namespace: ns, Flow: &Flow{Repo: repo, Every: every, Commit: func(n int) map[string]string {
		return map[string]string{"compose.yaml": services.String(), ".env": fmt.Sprintf("IMAGE=%s\nN=%d\n", image, n)}
	}}}
	d.Flow.Land(tb)
	opts.Dir = tb.TempDir()
	opts.AppSet = filepath.Join(opts.Dir, "apps.yaml")
	opts.ID = ns
	if opts.Engine == "" && len(opts.Engines) == 0 {
		opts.Engine = EngineSocket(tb)
	}
	if err := os.WriteFile(opts.AppSet, fmt.Appendf(nil, `apiVersion: skep/v1
applications:
  - name: web
    release: %s
    source: {repo: %s, revision: main}
    syncPolicy: {automated: true, interval: 10s, resolveImage: never}
`, ns, repo.URL), 0o644); err != nil {
		tb.Fatal(err)
	}
	d.HA = StartHA(tb, opts)
	d.Flow.Pushed = func(sha string) {
		if err := d.HA.Push(tb.Context(), repo.URL, sha); err != nil {
			tb.Logf("push of %.12s: %v", sha, err)
		}
	}
	return d
}

// Applied reports whether commit was recorded as a revision.
func (d *Deployment) Applied(commit string) bool { return d.HA.Revisions()[commit] > 0 }

// TermInterval is the span of one term's writes, lease writes aside: from
// the first one sent to the last one answered.
type TermInterval struct {
	Term        int64
	Replica     string
	First, Last time.Time
	Writes      int
}

// Intervals returns each term's writes' span, by term; a write belongs to
// the last term its sender took before sending it.
func (h *HA) Intervals() []TermInterval {
	terms := h.Terms()
	byTerm := map[int64]*TermInterval{}
	for _, r := range h.Replicas {
		for _, w := range r.Proxy.Writes() {
			if h.leaseWrite(w) {
				continue
			}
			var term int64
			for _, t := range terms {
				if t.Holder == r && !t.Sent.After(w.At) {
					term = t.Number
				}
			}
			in := byTerm[term]
			if in == nil {
				in = &TermInterval{Term: term, Replica: r.Name, First: w.At, Last: w.Done}
				byTerm[term] = in
			}
			in.Writes++
			if w.At.Before(in.First) {
				in.First = w.At
			}
			if w.Done.After(in.Last) {
				in.Last = w.Done
			}
		}
	}
	out := make([]TermInterval, 0, len(byTerm))
	for _, in := range byTerm {
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b TermInterval) int { return int(a.Term - b.Term) })
	return out
}

// Overlaps lists the pairs of terms whose writes' spans overlap.
func Overlaps(intervals []TermInterval) []string {
	var out []string
	for i := range intervals {
		for j := i + 1; j < len(intervals); j++ {
			a, b := intervals[i], intervals[j]
			if a.First.Before(b.Last) && b.First.Before(a.Last) {
				out = append(out, fmt.Sprintf("term %d (%s, %s–%s) and term %d (%s, %s–%s)",
					a.Term, a.Replica, a.First.Format("15:04:05.000"), a.Last.Format("15:04:05.000"),
					b.Term, b.Replica, b.First.Format("15:04:05.000"), b.Last.Format("15:04:05.000")))
			}
		}
	}
	return out
}
