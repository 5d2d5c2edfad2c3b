package bench

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"
)

// SoakHAOptions say how long and how hard SoakHA runs. The zero value
// means every default.
type SoakHAOptions struct {
	// Binary is the skep binary; required.
	Binary string
	// Duration is how long replicas are killed; default 20m.
	Duration time.Duration
	// CommitEvery is the pace of the commits (each waits for the last
	// one applied, so during a take-over they wait); default 3s.
	CommitEvery time.Duration
	// KillMin and KillMax bound the wait before each kill, drawn
	// uniformly between them; default 30s and 90s.
	KillMin, KillMax time.Duration
	// Restart is how long a killed replica stays down; default 5s, the
	// pace of Swarm's restart policy.
	Restart time.Duration
	// Replicas is how many run; default 3.
	Replicas int
	// Log receives progress; nil discards it.
	Log *slog.Logger
}

func (o SoakHAOptions) withDefaults() SoakHAOptions {
	if o.Duration <= 0 {
		o.Duration = 20 * time.Minute
	}
	if o.CommitEvery <= 0 {
		o.CommitEvery = 3 * time.Second
	}
	if o.KillMin <= 0 {
		o.KillMin = 30 * time.Second
	}
	if o.KillMax < o.KillMin {
		o.KillMax = max(o.KillMin, 90*time.Second)
	}
	if o.Restart <= 0 {
		o.Restart = 5 * time.Second
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Kill is one replica the HA soak killed.
type Kill struct {
	At      time.Time
	Replica string
	// Leader says it led when killed; Took is then the take-over's
	// length, from the kill to the next term's lease write answered.
	Leader bool
	Took   time.Duration
}

// SoakHAReport is what SoakHA saw. Errors sums its error counts.
type SoakHAReport struct {
	Opts               SoakHAOptions
	CPUs               int
	LoadStart, LoadEnd string
	Kills              []Kill
	// Commits landed; Twice were applied more than once, Never not at all.
	Commits, Twice, Never int
	// Terms are the leader terms the run went through; Late the writes a
	// replica sent while another held the lease; Overlaps the pairs of
	// terms whose writes' spans overlap.
	Terms    int
	Late     []string
	Overlaps []string
	// History compares the replicas' event histories at the end; Behind
	// says they did not reach the same last event.
	History Histories
	Behind  bool
}

// SoakHA runs a Deployment of Replicas replicas for Duration: a commit
// lands every CommitEvery once the last one was applied, and a random
// replica (leader or standby) is killed every KillMin–KillMax, then
// started again on its data Restart later. Then the last commit lands,
// and the report holds every check: each commit applied exactly once,
// no write by a replica while another held the lease, no two terms'
// writes overlapping, and the replicas' histories one history.
func SoakHA(tb testing.TB, docker *dockerclient.Client, opts SoakHAOptions) *SoakHAReport {
	tb.Helper()
	opts = opts.withDefaults()
	r := &SoakHAReport{Opts: opts, CPUs: runtime.NumCPU(), LoadStart: loadAverage()}
	d := StartDeployment(tb, docker, HAOptions{Binary: opts.Binary, Replicas: opts.Replicas}, opts.CommitEvery)
	d.Flow.Await = d.Applied
	h := d.HA
	h.WaitLeader(tb, d.Flow, 0, time.Minute)
	opts.Log.Info("soak-ha: replicas up", "replicas", opts.Replicas, "duration", opts.Duration)
	end := time.Now().Add(opts.Duration)
	for time.Now().Before(end) {
		wait := opts.KillMin + rand.N(opts.KillMax-opts.KillMin+1)
		d.Flow.Until(tb, min(wait, time.Until(end)), func() bool { return false })
		if time.Now().After(end) {
			break
		}
		r.Kills = append(r.Kills, killOne(tb, d, opts))
		k := r.Kills[len(r.Kills)-1]
		opts.Log.Info("soak-ha: killed", "replica", k.Replica, "leader", k.Leader, "took", k.Took.Round(time.Millisecond), "commits", len(d.Flow.Commits))
	}
	d.Flow.Every = 0
	last := d.Flow.Land(tb)
	if !d.Flow.Until(tb, 2*time.Minute, func() bool { return d.Applied(last) }) {
		opts.Log.Error("soak-ha: the last commit was not applied", "commit", last)
	}
	r.Behind = !h.CaughtUp(tb.Context(), time.Minute)
	r.check(tb, d)
	r.LoadEnd = loadAverage()
	return r
}

// killOne kills a random replica, waits for a take-over when it led, and
// starts it again once it was down for opts.Restart.
func killOne(tb testing.TB, d *Deployment, opts SoakHAOptions) Kill {
	h := d.HA
	victim := h.Replicas[rand.N(len(h.Replicas))]
	terms := h.Terms()
	led := len(terms) > 0 && terms[len(terms)-1].Holder == victim
	k := Kill{At: time.Now(), Replica: victim.Name, Leader: led}
	victim.Kill(tb)
	if led {
		before := terms[len(terms)-1].Number
		var to Term
		if d.Flow.Until(tb, time.Minute, func() bool {
			t := h.Terms()
			to = t[len(t)-1]
			return to.Number > before
		}) {
			k.Took = to.Taken.Sub(k.At)
		}
	}
	d.Flow.Until(tb, time.Until(k.At.Add(opts.Restart)), func() bool { return false })
	victim.Start(tb)
	return k
}

// check fills in what the proxies and the replicas' histories say.
func (r *SoakHAReport) check(tb testing.TB, d *Deployment) {
	h := d.HA
	r.Commits = len(d.Flow.Commits)
	revisions := h.Revisions()
	for _, c := range d.Flow.Commits {
		switch n := revisions[c]; {
		case n == 0:
			r.Never++
		case n > 1:
			r.Twice++
		}
	}
	r.Terms = len(h.Terms())
	for _, l := range h.LateWrites() {
		r.Late = append(r.Late, l.String())
	}
	r.Overlaps = Overlaps(h.Intervals())
	hist, err := h.Histories(tb.Context())
	if err != nil {
		tb.Errorf("soak-ha: histories: %v", err)
	}
	r.History = hist
}

// Errors counts what must not happen.
func (r *SoakHAReport) Errors() int {
	return r.Twice + r.Never + len(r.Late) + len(r.Overlaps) + len(r.History.Doubled) + len(r.History.Missing) +
		len(r.History.Differs) + map[bool]int{true: 1}[r.Behind]
}

// Print writes the report as a Markdown table.
func (r *SoakHAReport) Print(w io.Writer) error {
	var took []time.Duration
	leaders := 0
	for _, k := range r.Kills {
		if k.Leader {
			leaders++
			took = append(took, k.Took)
		}
	}
	failover := "—"
	if len(took) > 0 {
		failover = fmt.Sprintf("%s (%s)", seconds(median(took)), seconds(slices.Max(took)))
	}
	kept := []string{}
	for name, n := range r.History.Kept {
		kept = append(kept, fmt.Sprintf("%s %d", name, n))
	}
	slices.Sort(kept)
	rows := [][]string{{"check", "seen", "want"},
		{"Replicas killed (of them leaders)", fmt.Sprintf("%d (%d)", len(r.Kills), leaders), "—"},
		{"Take-over after a leader's kill: median (worst)", failover, "≤ 12 s"},
		{"Leader terms", strconv.Itoa(r.Terms), "—"},
		{"Commits landed", strconv.Itoa(r.Commits), "—"},
		{"Commits applied more than once", strconv.Itoa(r.Twice), "0"},
		{"Commits never applied", strconv.Itoa(r.Never), "0"},
		{"Writes sent by a replica while another held the lease", strconv.Itoa(len(r.Late)), "0"},
		{"Terms whose writes overlap", strconv.Itoa(len(r.Overlaps)), "0"},
		{"Events kept, by replica", strings.Join(kept, ", "), "equal"},
		{"Events kept twice by a replica", strconv.Itoa(len(r.History.Doubled)), "0"},
		{"Events a replica lacks that another keeps", strconv.Itoa(len(r.History.Missing)), "0"},
		{"Events that differ between replicas", strconv.Itoa(len(r.History.Differs)), "0"},
		{"Events only a killed leader kept (its last instant)", strconv.Itoa(len(r.History.Orphans)), "—"},
		{"Replicas' histories caught up at the end", strconv.FormatBool(!r.Behind), "true"},
	}
	head := fmt.Sprintf("%s, a commit every %s, a replica killed every %s–%s, %d replicas; %d CPUs, load %s at the start, %s at the end.",
		r.Opts.Duration, r.Opts.CommitEvery, r.Opts.KillMin, r.Opts.KillMax, r.Opts.Replicas, r.CPUs, r.LoadStart, r.LoadEnd)
	if _, err := io.WriteString(w, head+"\n\n"+markdownTable(rows)+"\n"); err != nil {
		return err
	}
	for _, what := range [][]string{r.Late, r.Overlaps, r.History.Doubled, r.History.Missing, r.History.Differs, r.History.Orphans} {
		for _, s := range what {
			if _, err := fmt.Fprintln(w, "- "+s); err != nil {
				return err
			}
		}
	}
	return nil
}
