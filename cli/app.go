package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/wire"
)

// newAppCommand builds `skep app`, the commands that read and steer
// applications through a running controller's API. Each subcommand makes
// its own client from the environment (see newClient), never from flags.
func newAppCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "app",
		Short: "See and steer applications through the controller's API",
		Long: "app talks to a running controller. The server comes from SKEP_SERVER or\n" +
			"~/.config/skep/config.yaml, the token from SKEP_TOKEN_FILE or SKEP_TOKEN.",
	}
	cmd.AddCommand(newAppListCommand(), newAppGetCommand(), newAppDiffCommand(), newAppHistoryCommand(),
		newAppSyncCommand(), newAppRollbackCommand(), newAppRefreshCommand(), newAppUnholdCommand(),
		newAppCanaryCommand("promote"), newAppCanaryCommand("abort"))
	return cmd
}

// fetch GETs path and either prints it raw (-o) or decodes it into v.
func fetch(cmd *cobra.Command, out output, path string, query map[string]string, v any) (printed bool, err error) {
	if err := out.check(); err != nil {
		return false, err
	}
	c, err := newClient(cmd.Context())
	if err != nil {
		return false, err
	}
	// Callers leave unset filters out; an empty value present is a filter
	// on "" (the local swarm, for swarm).
	q := map[string][]string{}
	for k, val := range query {
		q[k] = []string{val}
	}
	body, err := c.Call(cmd.Context(), http.MethodGet, path, q, nil)
	if err != nil {
		return false, apiFailure(err)
	}
	if out.raw() {
		// -o prints what the server sent, not a re-encoding of v: fields this
		// client does not know yet still reach scripts.
		return true, out.print(cmd.OutOrStdout(), body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return false, apiFailure(fmt.Errorf("decode answer of %s: %w", path, err))
	}
	return false, nil
}

// newAppListCommand builds `skep app list`: one table row per application.
func newAppListCommand() *cobra.Command {
	var (
		out       output
		swarmName string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List applications: swarm, sync, health, services, revisions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var query map[string]string
			// --swarm "" is a filter too: the local swarm.
			if cmd.Flags().Changed("swarm") {
				query = map[string]string{"swarm": swarmName}
			}
			var list wire.ApplicationList
			if printed, err := fetch(cmd, out, "/api/v1/applications", query, &list); printed || err != nil {
				return err
			}
			return printAppList(cmd.OutOrStdout(), list)
		},
	}
	out.register(cmd)
	cmd.Flags().StringVar(&swarmName, "swarm", "", `only the applications of this swarm ("" is the local one)`)
	return cmd
}

// nonEmpty drops the empty values of q: an unset flag is no filter.
func nonEmpty(q map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range q {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// printAppList writes the table of `skep app list`. Live state that could
// not be read is said below the table, so that zero running services are
// not mistaken for a stopped application.
func printAppList(w io.Writer, list wire.ApplicationList) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGENERATOR\tSWARM\tSYNC\tHEALTH\tSERVICES\tREVISION\tDEPLOYED\tAUTO\tPHASE\tWAITING\tERROR")
	for _, a := range list.Applications {
		deployed := short(a.DeployedRevision)
		switch {
		case a.Held != nil:
			deployed += " (held)"
		case a.RolledBack != nil:
			deployed += " (rolled back)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%t\t%s\t%s\t%s\n", a.Name, orDash(a.Generator), orDash(a.Swarm), a.Sync, a.Health,
			a.Services.Running, a.Services.Desired, short(a.Revision), deployed, a.Automated, a.Phase,
			orDash(waiting(a)), orDash(oneLine(a.LastError, 60)))
	}
	if list.LiveError != "" {
		fmt.Fprintf(tw, "\nlive state unavailable: %s\n", list.LiveError)
	}
	return tw.Flush()
}

// waiting says in a few words what holds an application's automated
// syncs: "window deny 0 22 * * * until 06:00 Europe/Berlin".
func waiting(a wire.Application) string {
	if w := a.SyncWindow; w != nil {
		s := "window " + w.Kind + " " + w.Schedule
		if w.Until != nil {
			s += " until " + w.Until.In(zone(w.TimeZone)).Format("2006-01-02 15:04") + " " + w.TimeZone
		}
		return s
	}
	if len(a.WaitingFor) > 0 {
		return "after " + strings.Join(a.WaitingFor, ", ")
	}
	return ""
}

// zone loads a time zone the controller named, UTC when this machine does
// not know it.
func zone(name string) *time.Location {
	if loc, err := time.LoadLocation(name); err == nil {
		return loc
	}
	return time.UTC
}

// newAppGetCommand builds `skep app get`: one application in detail.
func newAppGetCommand() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one application: releases, services and tasks",
		Long: "get shows one application: its source, sync state and health, then each release\n" +
			"with its services and tasks.\n\n" +
			"Last sync is the last sync of any kind that wrote the application, and who or\n" +
			"what started it: \"by alice\" for a sync someone asked for, or \"by the\n" +
			"controller:\" and its trigger (new commit in git, push webhook, interval, drift\n" +
			"correction) when the controller acted on its own. After a restart it is the\n" +
			"last successful sync the history store recorded, with its actor but no trigger\n" +
			"(the store keeps none), until the next sync. Requested sync is the last sync\n" +
			"someone asked for since the controller started, whatever its outcome.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d wire.ApplicationDetail
			if printed, err := fetch(cmd, out, client.AppPath(args[0], ""), nil, &d); printed || err != nil {
				return err
			}
			return printAppDetail(cmd.OutOrStdout(), d)
		},
	}
	out.register(cmd)
	return cmd
}

// triggerText says, after "by the controller: ", what made the controller
// sync on its own; the UI uses the same words.
var triggerText = map[string]string{
	wire.TriggerWebhook:         "push webhook",
	wire.TriggerGit:             "new commit in git",
	wire.TriggerInterval:        "interval",
	wire.TriggerDriftCorrection: "drift correction",
}

// startedBy says who or what started a sync: the actor who asked, or the
// controller and its trigger. A sync an earlier run recorded has no
// trigger: its actor, or the controller, is all that is known.
func startedBy(trigger, actor string) string {
	if trigger == wire.TriggerSync || trigger == "" {
		if actor == "" {
			return "by the controller"
		}
		return "by " + actor
	}
	return "by the controller: " + cmp.Or(triggerText[trigger], trigger)
}

// printAppDetail writes `skep app get`: a header of key-value lines, then
// one table of services and their tasks per release.
func printAppDetail(w io.Writer, d wire.ApplicationDetail) error {
	a := d.Application
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", a.Name)
	fmt.Fprintf(tw, "Source:\t%s @ %s, path %s\n", a.Repo, a.TargetRevision, a.Path)
	if a.Generator != "" {
		fmt.Fprintf(tw, "Generated:\tby generator %s from directory %s\n", a.Generator, a.Path)
	}
	if a.Self {
		fmt.Fprintf(tw, "Self:\tdeploys this controller (its own service is written last, never pruned)\n")
	}
	fmt.Fprintf(tw, "Swarm:\t%s\n", orDash(a.Swarm))
	fmt.Fprintf(tw, "Sync:\t%s (automated: %t)\n", a.Sync, a.Automated)
	fmt.Fprintf(tw, "Health:\t%s\n", a.Health)
	fmt.Fprintf(tw, "Revision:\t%s (deployed %s)\n", short(a.Revision), short(a.DeployedRevision))
	if a.Held != nil {
		fmt.Fprintf(tw, "Held:\tat %s by %s since %s\n", short(a.Held.Revision), orDash(a.Held.Actor), a.Held.Since.Format(time.RFC3339))
	}
	if r := a.RolledBack; r != nil {
		fmt.Fprintf(tw, "Held off:\t%s since %s: its rollout failed and %s (revision %d) was written back; a new commit, a sync or a rollback lifts it\n",
			short(r.Revision), r.Since.Format(time.RFC3339), short(r.Restored), r.RestoredRevision)
	}
	if c := a.Cause; c != nil {
		fmt.Fprintf(tw, "Cause:\t%s\n", oneLine(c.Line, 300))
	}
	fmt.Fprintf(tw, "Phase:\t%s\n", a.Phase)
	if len(a.DependsOn) > 0 {
		line := strings.Join(a.DependsOn, ", ")
		if len(a.WaitingFor) > 0 {
			line += " (waiting for " + strings.Join(a.WaitingFor, ", ") + ")"
		}
		fmt.Fprintf(tw, "Depends on:\t%s\n", line)
	}
	if w := a.SyncWindow; w != nil {
		manual := "manual syncs pass"
		if !w.ManualSync {
			manual = "manual syncs refused"
		}
		fmt.Fprintf(tw, "Sync window:\t%s; %s\n", w.Message, manual)
	}
	if l := a.LastApplied; l != nil {
		fmt.Fprintf(tw, "Last sync:\t%s at %s %s\n", short(l.Revision), l.At.Format(time.RFC3339), startedBy(l.Trigger, l.Actor))
	} else {
		fmt.Fprintf(tw, "Last sync:\tnone recorded\n")
	}
	if a.LastSync != nil {
		fmt.Fprintf(tw, "Requested sync:\t#%d %s at %s by %s\n", a.LastSync.ID, a.LastSync.Outcome, short(a.LastSync.Revision), orDash(a.LastSync.Actor))
	}
	if a.LastError != "" {
		fmt.Fprintf(tw, "Error:\t%s (%s)\n", oneLine(a.LastError, 200), a.LastErrorClass)
	}
	for _, p := range a.Plan {
		fmt.Fprintf(tw, "Plan:\t%s\n", p)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c := a.Cause; c != nil && strings.TrimSpace(c.Logs) != "" {
		fmt.Fprintf(w, "\nLog tail of %s (task %s):\n%s\n", c.Service, c.Task, c.Logs)
	}
	if err := printCanary(w, a.Canary); err != nil {
		return err
	}
	if err := printArtifacts(w, a.Artifacts); err != nil {
		return err
	}
	if err := printPreviews(w, a.Previews, a.PreviewProblems); err != nil {
		return err
	}
	for _, r := range d.Releases {
		// Each release gets a tabwriter of its own, so its table aligns its own
		// columns and the release line between tables is not padded.
		fmt.Fprintf(w, "\nRelease %s: revision %d (%s)\n", r.Name, r.Revision, short(r.Commit))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SERVICE\tMODE\tREPLICAS\tIMAGE\tUPDATE")
		for _, s := range r.Services {
			fmt.Fprintf(tw, "  %s\t%s\t%d/%d\t%s\t%s\n", s.Name, s.Mode, s.Running, s.Desired, s.Image, orDash(s.UpdateState))
			for _, t := range s.Tasks {
				fmt.Fprintf(tw, "    task %s\tslot %d on %s\t%s/%s\t%s\t%s\n", short(t.ID), t.Slot, orDash(t.Node), t.State, t.DesiredState,
					orDash(oneLine(t.Error, 60)), t.UpdatedAt.Format(time.RFC3339))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if d.LiveError != "" {
		fmt.Fprintf(w, "\nlive state unavailable: %s\n", d.LiveError)
	}
	return nil
}

// printArtifacts prints an application's release artifacts as a table:
// what git asks for, what runs, what the render uses and why.
func printArtifacts(w io.Writer, arts []wire.Artifact) error {
	if len(arts) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nArtifacts:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tKIND\tSTRATEGY\tDESIRED\tCURRENT\tUSED\tIMAGE\tDRIFT")
	for _, a := range arts {
		// A pushed image needs no reason; a waiting or failed one says why,
		// which is the line an operator looks for.
		image := orDash(a.Condition)
		if a.Reason != "" && a.Condition != "pushed" {
			image += ": " + oneLine(a.Reason, 80)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.Kind, a.Strategy,
			orDash(short(a.Desired)), orDash(short(a.Current)), orDash(short(a.Version)), image, a.Drift)
	}
	return tw.Flush()
}

// printPreviews prints an application's preview releases: branch, commit,
// domain, health, and why one is not at its branch's version.
func printPreviews(w io.Writer, previews []wire.Preview, problems []string) error {
	if len(previews) == 0 && len(problems) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nPreviews:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  BRANCH\tCOMMIT\tRELEASE\tDOMAIN\tHEALTH\tNOTE")
	for _, p := range previews {
		// A preview not running anything yet without an error is one whose
		// branch image is not pushed: say so rather than leave a blank.
		note := p.Error
		if !p.Deployed && note == "" {
			note = "not deployed"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", p.Branch, short(p.Commit), p.Release, orDash(p.Domain), p.Health, orDash(oneLine(note, 80)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Problems (a hash collision, the bound, an ignored environment) name
	// branches without a preview, so they go below the table.
	for _, p := range problems {
		fmt.Fprintf(w, "  ! %s\n", p)
	}
	return nil
}

// newAppDiffCommand builds `skep app diff`: the plan of a sync, computed by
// the controller and printed by package plan, as `skep deploy --dry-run`
// prints it.
func newAppDiffCommand() *cobra.Command {
	var out output
	var revision string
	cmd := &cobra.Command{
		Use:   "diff NAME",
		Short: "Show what a sync would change, per release, at Swarm-spec level",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var d wire.Diff
			if printed, err := fetch(cmd, out, client.AppPath(args[0], "/diff"), nonEmpty(map[string]string{"revision": revision}), &d); printed || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s at %s\n", d.Application, short(d.Revision))
			if err := plan.Render(cmd.OutOrStdout(), plansOf(d.Releases)); err != nil {
				return err
			}
			return printUnplaceable(cmd.OutOrStdout(), d.Releases)
		},
	}
	out.register(cmd)
	cmd.Flags().StringVar(&revision, "revision", "", "plan this commit, branch or tag instead of the tracked revision")
	return cmd
}

// printUnplaceable says, per release, what no node of the swarm
// satisfies for its services: a sync of it is refused before any write
// unless the application allows it.
func printUnplaceable(w io.Writer, releases []wire.ReleasePlan) error {
	for _, r := range releases {
		if len(r.Unplaceable) == 0 {
			continue
		}
		if _, err := fmt.Fprintf(w, "\nRelease %s cannot be placed:\n", r.Name); err != nil {
			return err
		}
		for _, line := range r.Unplaceable {
			if _, err := fmt.Fprintf(w, "  %s\n", line); err != nil {
				return err
			}
		}
	}
	return nil
}

// newAppHistoryCommand builds `skep app history`: the revisions `skep app
// rollback` takes, and who synced what.
func newAppHistoryCommand() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Show recorded revisions and the sync history with actors",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var h wire.History
			if printed, err := fetch(cmd, out, client.AppPath(args[0], "/history"), nil, &h); printed || err != nil {
				return err
			}
			return printHistory(cmd.OutOrStdout(), h)
		},
	}
	out.register(cmd)
	return cmd
}

// printHistory writes each release's revisions newest first, then the
// syncs. A sync history the store could not give is said, not hidden.
func printHistory(w io.Writer, h wire.History) error {
	for _, r := range h.Releases {
		fmt.Fprintf(w, "Release %s\n", r.Name)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  REVISION\tCOMMIT\tAPPLIED\tACTOR\tCHART")
		// The API lists revisions oldest first; people want the newest on top.
		for i := len(r.Revisions) - 1; i >= 0; i-- {
			rev := r.Revisions[i]
			chart := "-"
			if c := rev.Chart; c != nil {
				chart = c.Name + " " + c.Version
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", rev.Number, short(rev.Commit), rev.AppliedAt.Format(time.RFC3339), orDash(rev.Actor), chart)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nSyncs")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STARTED\tOUTCOME\tREVISION\tACTOR\tSUMMARY")
	for _, s := range h.Syncs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", s.StartedAt.Format(time.RFC3339), s.Outcome, short(s.Revision), orDash(s.Actor),
			orDash(oneLine(s.Error+s.Summary, 80)))
	}
	if h.SyncsError != "" {
		fmt.Fprintf(tw, "  sync history unavailable: %s\n", h.SyncsError)
	}
	return tw.Flush()
}

// syncFlags are shared by sync and rollback.
// The zero value is no --wait and no timeout; register sets the defaults.
type syncFlags struct {
	out     output
	wait    bool
	timeout time.Duration
}

// register adds -o, --wait and --timeout to cmd.
func (f *syncFlags) register(cmd *cobra.Command) {
	f.out.register(cmd)
	cmd.Flags().BoolVar(&f.wait, "wait", false, "wait for the sync to end and the swarm to run what it wrote; exit non-zero if it failed")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long --wait waits")
}

// post sends a sync or rollback and handles output and --wait.
func (f *syncFlags) post(cmd *cobra.Command, name, path string, body any) error {
	if err := f.out.check(); err != nil {
		return err
	}
	c, err := newClient(cmd.Context())
	if err != nil {
		return err
	}
	raw, err := c.Call(cmd.Context(), http.MethodPost, path, nil, body)
	if err != nil {
		return apiFailure(err)
	}
	var resp wire.SyncResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return apiFailure(fmt.Errorf("decode answer of %s: %w", path, err))
	}
	// With -o, stdout holds only the server's answer, so a script can parse
	// it; what --wait prints goes to stderr.
	progress := cmd.OutOrStdout()
	if f.out.raw() {
		if err := f.out.print(cmd.OutOrStdout(), raw); err != nil {
			return err
		}
		progress = cmd.ErrOrStderr()
	} else {
		switch resp.Status {
		// A dry run answers with its plan and queues nothing: there is nothing
		// to wait for.
		case wire.SyncPlanned:
			if resp.Diff != nil {
				fmt.Fprintf(progress, "%s at %s (dry run)\n", name, short(resp.Diff.Revision))
				return plan.Render(progress, plansOf(resp.Diff.Releases))
			}
		// A sync already queued for the application absorbs this one; its id
		// is the one to wait for.
		case wire.SyncMerged:
			fmt.Fprintf(progress, "%s: sync merged into queued sync #%d\n", name, resp.ID)
		default:
			fmt.Fprintf(progress, "%s: sync #%d queued", name, resp.ID)
			if resp.Revision != "" {
				fmt.Fprintf(progress, " at %s (held there)", short(resp.Revision))
			}
			fmt.Fprintln(progress)
		}
	}
	if !f.wait || resp.Status == wire.SyncPlanned {
		return nil
	}
	// The timeout bounds only the wait: the sync itself goes on in the
	// controller whatever this command does.
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	return apiFailure(waitSync(ctx, c, progress, name, resp.ID))
}

// waitSync polls the application until sync id ended, then until its
// services converged, printing each change of phase or counts.
// It returns nil once the services converged, and an error when the
// sync failed or ctx ended first.
func waitSync(ctx context.Context, c *client.Client, w io.Writer, name string, id uint64) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last string
	var done *wire.SyncRecord
	for {
		d, err := c.Application(ctx, name)
		if err != nil {
			return err
		}
		a := d.Application
		// Between two polls a later sync (a tick's, another user's) can end
		// after ours and replace it as LastSync, hence >= and not ==.
		if done == nil && a.LastSync != nil && a.LastSync.ID >= id && a.LastSync.Outcome != wire.OutcomeRunning {
			s := *a.LastSync
			done = &s
			if s.Outcome == wire.OutcomeFailed {
				return fmt.Errorf("sync #%d of %s failed: %s", s.ID, name, s.Error)
			}
			fmt.Fprintf(w, "%s: sync #%d succeeded at %s\n", name, s.ID, short(s.Revision))
		}
		// Once the sync ended, what is left is the swarm rolling tasks out,
		// which the controller's phase does not say.
		phase := a.Phase
		if done != nil {
			phase = "converging"
		}
		line := fmt.Sprintf("%s: %s, services %d/%d converged", name, phase, a.Services.Running, a.Services.Desired)
		if done != nil && d.Converging != "" {
			line += " (" + d.Converging + ")"
		}
		// Print changes only, so a long wait is a short log.
		if line != last {
			fmt.Fprintln(w, line)
			last = line
		}
		// The counts are of the controller's snapshot of the swarm, which
		// follows the write: until Converging is "" they may be of the
		// services before it (none, for an install). See
		// TestWaitSyncWaitsUntilTheLiveViewShowsTheWrite.
		if done != nil && d.Converging == "" && a.Services.Running == a.Services.Desired {
			return nil
		}
		select {
		case <-ctx.Done():
			if done != nil {
				why := fmt.Sprintf("%d/%d running", a.Services.Running, a.Services.Desired)
				if d.Converging != "" {
					why += "; " + d.Converging
				}
				return fmt.Errorf("sync #%d of %s succeeded but services did not converge in time (%s)", id, name, why)
			}
			return fmt.Errorf("sync #%d of %s did not end in time: %w", id, name, ctx.Err())
		case <-tick.C:
		}
	}
}

// newAppSyncCommand builds `skep app sync`. Without --wait it returns once
// the controller queued the sync.
func newAppSyncCommand() *cobra.Command {
	var f syncFlags
	var dryRun bool
	var revision, prune string
	cmd := &cobra.Command{
		Use:   "sync NAME",
		Short: "Deploy what git declares now (queued; coalesced with a sync already queued)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := wire.SyncOptions{DryRun: dryRun, Revision: revision}
			// A string rather than a bool flag: unset must mean "the application's
			// policy", which a bool cannot tell from false.
			if prune != "" {
				p, err := strconv.ParseBool(prune)
				if err != nil {
					return usageError("--prune: want true or false, got %q", prune)
				}
				opts.Prune = &p
			}
			return f.post(cmd, args[0], client.AppPath(args[0], "/sync"), opts)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "plan and print the diff; change nothing")
	cmd.Flags().StringVar(&revision, "revision", "", "deploy this commit, branch or tag and hold the application there")
	cmd.Flags().StringVar(&prune, "prune", "", "prune on (true) or off (false) for this sync; default the application's policy")
	return cmd
}

// newAppRollbackCommand builds `skep app rollback`, which re-deploys the
// commit a recorded revision names (see its Long help).
func newAppRollbackCommand() *cobra.Command {
	var f syncFlags
	var release string
	cmd := &cobra.Command{
		Use:   "rollback NAME REVISION",
		Short: "Deploy a recorded revision again and hold the application there",
		Long: "rollback re-deploys the commit recorded in revision REVISION (see `skep app history`)\n" +
			"and holds the application at it: ticks no longer follow the branch until\n" +
			"`skep app sync NAME` or `skep app unhold NAME`.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n <= 0 {
				return usageError("REVISION: want a revision number from `skep app history`, got %q", args[1])
			}
			return f.post(cmd, args[0], client.AppPath(args[0], "/rollback"), wire.RollbackOptions{Revision: n, Release: release})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&release, "release", "", "the release, when the application has several")
	return cmd
}

// newAppRefreshCommand builds `skep app refresh`: read git now, rather
// than at the next interval.
func newAppRefreshCommand() *cobra.Command {
	return simplePost("refresh NAME", "Re-read git now (applies only when the application is automated)", "/refresh", "refresh queued")
}

// newAppUnholdCommand builds `skep app unhold`, which lifts the hold a
// rollback or a sync to a revision left.
func newAppUnholdCommand() *cobra.Command {
	return simplePost("unhold NAME", "Release a rollback's hold: follow the tracked revision again", "/unhold", "hold released")
}

// simplePost builds a command that POSTs to the application path plus
// suffix with no body and prints "NAME: done", or the raw answer with -o.
func simplePost(use, summary, suffix, done string) *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   use,
		Short: summary,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := newClient(cmd.Context())
			if err != nil {
				return err
			}
			raw, err := c.Call(cmd.Context(), http.MethodPost, client.AppPath(args[0], suffix), nil, nil)
			if err != nil {
				return apiFailure(err)
			}
			if out.raw() {
				return out.print(cmd.OutOrStdout(), raw)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", args[0], done)
			return nil
		},
	}
	out.register(cmd)
	return cmd
}

// plansOf turns the API's plans back into plan's type, which knows how to
// print them.
func plansOf(in []wire.ReleasePlan) []plan.Release {
	// The wire model holds plans as plain strings (it imports no server
	// package); plan's own types are what its printer understands.
	out := make([]plan.Release, 0, len(in))
	for _, p := range in {
		r := plan.Release{Name: p.Name, Action: plan.Action(p.Action), Reason: p.Reason}
		for _, c := range p.Changes {
			ch := plan.Change{Kind: plan.Kind(c.Kind), Name: c.Name, Op: plan.Op(c.Op), Reason: c.Reason}
			for _, f := range c.Fields {
				ch.Fields = append(ch.Fields, plan.FieldDiff(f))
			}
			r.Changes = append(r.Changes, ch)
		}
		out = append(out, r)
	}
	return out
}
