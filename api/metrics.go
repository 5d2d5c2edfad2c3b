package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/wire"
)

// AppState is one application's state for the per-application gauges.
type AppState struct {
	Name string
	// Swarm is the destination the application deploys to; "" is the
	// local swarm.
	Swarm string
	// Sync and Health are the wire names of the states ("synced",
	// "healthy", ...); an empty Health is exported as unknown.
	Sync   string
	Health string
	// DriftFindings counts the application's live drift findings.
	DriftFindings int
	// Artifacts maps each release artifact's name to its drift state:
	// wire.ArtifactInSync, ArtifactWaiting or ArtifactReady.
	Artifacts map[string]string
}

// Counter reads a monotonic count kept elsewhere (the git cache, a
// notifier), exported as a Prometheus counter at scrape time.
type Counter struct {
	Name, Help string
	// Labels are constant labels; they tell apart counters of one name.
	Labels prometheus.Labels
	// Read returns the count; it is called at every scrape, concurrently
	// with anything else, and must not block.
	Read func() float64
}

// MetricsOptions wire what Metrics reads at scrape time. Every field may
// be nil or empty.
type MetricsOptions struct {
	// Applications returns the current state of every application. It
	// must not call the swarm: a scrape costs no Docker request.
	Applications func() []AppState
	// Swarms returns every destination and whether it answers; nil
	// exports none. Like Applications, it must not call the swarm.
	Swarms func() []SwarmState
	// Counters are counts kept by other packages: git remote calls,
	// notifier deliveries and failures.
	Counters []Counter
	// Version and Commit label skep_build_info.
	Version, Commit string
}

// SwarmState is one destination as skep_swarm_up exports it.
type SwarmState struct {
	Name      string
	Reachable bool
}

// The sync and health states exported as state sets: one series per
// state, 1 for the current one and 0 for the others, so a state change
// flips values instead of making a series vanish, and an alert can match
// state="degraded" without juggling absent series.
var (
	syncStates   = []string{"synced", "out-of-sync", "unknown"}
	healthStates = []string{"healthy", "progressing", "degraded", "missing", "unknown"}
)

// Metrics holds Skep's Prometheus metrics on a private registry (nothing
// registers on the global default). Its methods are safe for concurrent
// use. A nil *Metrics records nothing.
type Metrics struct {
	reg *prometheus.Registry

	reconciles        *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	syncs             *prometheus.CounterVec
	applyDuration     *prometheus.HistogramVec
	gitDuration       prometheus.Histogram
	gitFailures       prometheus.Counter
	webhooks          *prometheus.CounterVec
	sseSubscribers    prometheus.Gauge
	quietReconciles   prometheus.Counter
	requests          *prometheus.CounterVec
	requestDuration   *prometheus.HistogramVec
}

// NewMetrics returns the metrics with every collector registered, the Go
// and process collectors included. It panics when opts.Counters has an
// invalid or clashing name, a programmer error caught at start-up; use
// AddCounters to get an error instead.
func NewMetrics(opts MetricsOptions) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skep_reconcile_total", Help: "Reconciles run, by application, swarm and outcome (ok, stalled, waiting, transient).",
		}, []string{"application", "swarm", "outcome"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "skep_reconcile_duration_seconds", Help: "Time one reconcile took, by swarm and outcome.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"swarm", "outcome"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skep_sync_total", Help: "Applies run, by application, swarm and outcome (succeeded, failed).",
		}, []string{"application", "swarm", "outcome"}),
		applyDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "skep_apply_duration_seconds", Help: "Time one apply took, by swarm.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"swarm"}),
		gitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "skep_git_fetch_duration_seconds", Help: "Time resolving and fetching an application's revision took.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		gitFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skep_git_fetch_failures_total", Help: "Resolves or fetches of an application's revision that failed.",
		}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skep_webhook_deliveries_total", Help: "Inbound webhook deliveries, by provider and result.",
		}, []string{"provider", "result"}),
		sseSubscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "skep_sse_subscribers", Help: "Clients connected to the event stream.",
		}),
		quietReconciles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "skep_reconcile_quiet_total",
			Help: "Reconciles, of skep_reconcile_total, whose inputs were those of the last one that found nothing to do: nothing was rendered or compared.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skep_api_requests_total", Help: "API requests, by route pattern and status code.",
		}, []string{"route", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "skep_api_request_duration_seconds", Help: "Time API requests took, by route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
	}
	m.reg.MustRegister(m.reconciles, m.reconcileDuration, m.syncs, m.applyDuration, m.gitDuration,
		m.gitFailures, m.webhooks, m.sseSubscribers, m.quietReconciles, m.requests, m.requestDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "skep_build_info", Help: "Always 1; labels name the running build.",
		ConstLabels: prometheus.Labels{"version": opts.Version, "commit": opts.Commit},
	})
	build.Set(1)
	m.reg.MustRegister(build)
	if opts.Applications != nil {
		m.reg.MustRegister(appCollector(opts.Applications))
	}
	if opts.Swarms != nil {
		m.reg.MustRegister(swarmCollector(opts.Swarms))
	}
	if err := m.AddCounters(opts.Counters...); err != nil {
		panic(err) // a programmer error in the caller's names, caught at start-up
	}
	return m
}

// AddCounters registers counters read at scrape time. Counters may share a
// name when their labels differ. It fails on an invalid or clashing name.
func (m *Metrics) AddCounters(counters ...Counter) error {
	for _, c := range counters {
		err := m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: c.Name, Help: c.Help, ConstLabels: c.Labels,
		}, c.Read))
		if err != nil {
			return fmt.Errorf("metric %s: %w", c.Name, err)
		}
	}
	return nil
}

// Gauge reads a value kept elsewhere that goes up and down (which replica
// leads, the lease's term), exported at scrape time; its fields mean what
// Counter's do.
type Gauge Counter

// AddGauges registers gauges read at scrape time. It fails on an invalid
// or clashing name.
func (m *Metrics) AddGauges(gauges ...Gauge) error {
	for _, g := range gauges {
		err := m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: g.Name, Help: g.Help, ConstLabels: g.Labels,
		}, g.Read))
		if err != nil {
			return fmt.Errorf("metric %s: %w", g.Name, err)
		}
	}
	return nil
}

// The descriptors of appCollector's series.
var (
	syncStateDesc = prometheus.NewDesc("skep_application_sync_state",
		"1 for the sync state the application is in, 0 for the others.", []string{"application", "swarm", "state"}, nil)
	healthStateDesc = prometheus.NewDesc("skep_application_health_state",
		"1 for the health state the application is in, 0 for the others.", []string{"application", "swarm", "state"}, nil)
	driftDesc = prometheus.NewDesc("skep_application_drift_findings",
		"Live drift findings of the application.", []string{"application", "swarm"}, nil)
	artifactStateDesc = prometheus.NewDesc("skep_artifact_state",
		"1 for the drift state a release artifact is in (none: desired runs; waiting: desired image not pushed; ready: desired can deploy), 0 for the others.",
		[]string{"application", "swarm", "artifact", "state"}, nil)
	swarmUpDesc = prometheus.NewDesc("skep_swarm_up",
		"1 while the destination's managers answer, 0 while they do not.", []string{"swarm"}, nil)
)

// artifactStates are the values of skep_artifact_state's state label.
var artifactStates = []string{wire.ArtifactInSync, wire.ArtifactWaiting, wire.ArtifactReady}

// appCollector exports per-application state sets read at scrape time, so
// an application that left the app set leaves the metrics too.
type appCollector func() []AppState

// Describe implements prometheus.Collector.
func (f appCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- syncStateDesc
	ch <- healthStateDesc
	ch <- driftDesc
	ch <- artifactStateDesc
}

// Collect implements prometheus.Collector; it calls f once per scrape.
func (f appCollector) Collect(ch chan<- prometheus.Metric) {
	for _, a := range f() {
		for _, s := range syncStates {
			ch <- prometheus.MustNewConstMetric(syncStateDesc, prometheus.GaugeValue, boolValue(a.Sync == s), a.Name, a.Swarm, s)
		}
		health := a.Health
		if health == "" {
			health = wire.HealthUnknown
		}
		for _, s := range healthStates {
			ch <- prometheus.MustNewConstMetric(healthStateDesc, prometheus.GaugeValue, boolValue(health == s), a.Name, a.Swarm, s)
		}
		ch <- prometheus.MustNewConstMetric(driftDesc, prometheus.GaugeValue, float64(a.DriftFindings), a.Name, a.Swarm)
		for name, state := range a.Artifacts {
			for _, s := range artifactStates {
				ch <- prometheus.MustNewConstMetric(artifactStateDesc, prometheus.GaugeValue, boolValue(state == s), a.Name, a.Swarm, name, s)
			}
		}
	}
}

// swarmCollector exports skep_swarm_up, read at scrape time.
type swarmCollector func() []SwarmState

// Describe implements prometheus.Collector.
func (f swarmCollector) Describe(ch chan<- *prometheus.Desc) { ch <- swarmUpDesc }

// Collect implements prometheus.Collector; it calls f once per scrape.
func (f swarmCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range f() {
		ch <- prometheus.MustNewConstMetric(swarmUpDesc, prometheus.GaugeValue, boolValue(s.Reachable), s.Name)
	}
}

// boolValue is a state set's value: 1 for the current state, else 0.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ObserveReconcile records one reconcile; the reconciler calls it from its
// workers, concurrently. Apply and git figures are recorded only when the
// reconcile applied or read git.
func (m *Metrics) ObserveReconcile(o reconcile.Observation) {
	if m == nil {
		return
	}
	m.reconciles.WithLabelValues(o.Application, o.Swarm, string(o.Outcome)).Inc()
	m.reconcileDuration.WithLabelValues(o.Swarm, string(o.Outcome)).Observe(o.Duration.Seconds())
	if o.Quiet {
		m.quietReconciles.Inc()
	}
	if o.Sync {
		outcome := wire.OutcomeSucceeded
		if o.SyncFailed {
			outcome = wire.OutcomeFailed
		}
		m.syncs.WithLabelValues(o.Application, o.Swarm, outcome).Inc()
		m.applyDuration.WithLabelValues(o.Swarm).Observe(o.ApplyDuration.Seconds())
	}
	if o.GitDuration > 0 {
		m.gitDuration.Observe(o.GitDuration.Seconds())
	}
	if o.GitFailed {
		m.gitFailures.Inc()
	}
}

// webhook counts one inbound delivery by provider and result. A provider
// Skep does not know is counted as "other": the path segment comes from
// unauthenticated callers, and taking it as a label would let anyone
// create series without bound (see TestWebhookMetricsBoundTheProviderLabel).
func (m *Metrics) webhook(provider, result string) {
	if m == nil {
		return
	}
	if !slices.Contains(Providers(), provider) {
		provider = "other"
	}
	m.webhooks.WithLabelValues(provider, result).Inc()
}

// subscribers moves the event-stream gauge by delta (+1 on open, -1 on
// close).
func (m *Metrics) subscribers(delta float64) {
	if m != nil {
		m.sseSubscribers.Add(delta)
	}
}

// request counts one API request. route is the mux pattern, never the
// path: paths carry application names and would make a series per name.
func (m *Metrics) request(route string, code int, took time.Duration) {
	if m != nil {
		m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		m.requestDuration.WithLabelValues(route).Observe(took.Seconds())
	}
}

// Handler serves the registry in the Prometheus text format. It does no
// authorisation: mount it behind the guard or on a private listener.
func (m *Metrics) Handler() http.Handler {
	// ContinueOnError: a collector that fails (the process collector on an
	// unusual /proc) leaves the rest of the scrape served.
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry returns the private registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }
