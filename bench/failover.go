package bench

import (
	"fmt"
	"slices"
	"time"
)

// Failovers holds the take-overs one failover measurement made, and what
// the proxies saw of them.
type Failovers struct {
	// Each are the take-overs, by kind (FailKill, FailFreeze, FailStop), in
	// order.
	Each map[string][]Failover
	// Late counts the writes a replica sent while another held the lease.
	Late int
	// Twice counts the commits applied more than once.
	Twice int
}

// failoverKinds are the kinds a failover measurement makes, in order.
var failoverKinds = []string{FailKill, FailFreeze, FailStop}

// failovers measures take-overs (Options.FailoverOnly): a Deployment of
// three replicas with the default lease timings, a commit landing every
// two seconds, and Samples kills, freezes and stops of the leader each,
// interleaved, every service write slowed so that a failure comes in the
// middle of an apply.
func (e *env) failovers(r *Report) {
	e.log.Info("failover: three replicas, one application, a commit every 2 s")
	d := StartDeployment(e.tb, e.cli, HAOptions{Binary: e.opts.Binary, LogLevel: e.opts.ControllerLogLevel}, 2*time.Second)
	d.HA.WaitLeader(e.tb, d.Flow, 0, time.Minute)
	d.HA.SlowWrites(200 * time.Millisecond)
	f := Failovers{Each: map[string][]Failover{}}
	for i := range e.opts.Samples {
		for _, kind := range failoverKinds {
			one := d.HA.Fail(e.tb, d.Flow, kind, time.Minute)
			f.Each[kind] = append(f.Each[kind], one)
			e.log.Info("failover", "kind", kind, "sample", i+1, "took", one.Took.Round(time.Millisecond), "to", one.To)
		}
	}
	// A commit lands every two seconds: by now each new leader wrote one.
	d.Flow.Until(e.tb, 5*time.Second, func() bool { return false })
	for _, kind := range failoverKinds {
		for i := range f.Each[kind] {
			f.Each[kind][i].Resumed = d.HA.Resumed(f.Each[kind][i])
		}
	}
	f.Late = len(d.HA.LateWrites())
	for _, n := range d.HA.Revisions() {
		if n > 1 {
			f.Twice++
		}
	}
	r.Failovers = &f
}

// took lists how long each take-over of kind took.
func (f *Failovers) took(kind string) []time.Duration {
	var out []time.Duration
	for _, one := range f.Each[kind] {
		out = append(out, one.Took)
	}
	return out
}

// failoverRows are the failover measurement's rows of the table.
func (f *Failovers) rows(add func(m, skep, docker, target string, pass *bool)) {
	names := map[string]string{FailKill: "SIGKILL (a crash, its node gone)", FailFreeze: "SIGSTOP (a frozen process)", FailStop: "SIGTERM (a planned stop, an upgrade)"}
	for _, kind := range failoverKinds {
		took := f.took(kind)
		if len(took) == 0 {
			continue
		}
		var resumed []time.Duration
		for _, one := range f.Each[kind] {
			if one.Resumed > 0 {
				resumed = append(resumed, one.Resumed)
			}
		}
		limit, target := 12*time.Second, "≤ 12 s"
		if kind == FailStop {
			limit, target = 3*time.Second, "≤ 3 s"
		}
		worst := slices.Max(took)
		add(fmt.Sprintf("Failover after %s of the leader: median (worst) of %d", names[kind], len(took)),
			fmt.Sprintf("%s (%s)", seconds(median(took)), seconds(worst)), "none (one controller)", target, ok(worst <= limit))
		if len(resumed) > 0 {
			add(fmt.Sprintf("  … until the new leader's first write: median (worst) of %d", len(resumed)),
				fmt.Sprintf("%s (%s)", seconds(median(resumed)), seconds(slices.Max(resumed))), "", "—", nil)
		}
	}
	add("Writes sent by a replica while another held the lease", fmt.Sprint(f.Late), "", "0", ok(f.Late == 0))
	add("Commits applied more than once across the failovers", fmt.Sprint(f.Twice), "", "0", ok(f.Twice == 0))
}
