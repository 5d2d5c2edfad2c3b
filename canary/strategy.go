// Package canary holds progressive delivery's rules: a service's canary
// strategy as the compose extension x-skep-canary declares it (Parse), the
// state a running canary keeps in the swarm (State), the step machine that
// decides, from that state and one look at the swarm, what one pass does
// next (Next), and the analysis of metrics: conditions over a measured
// result (Condition, with expr-lang/expr), how measurements add up to a
// verdict (Record), and the providers that measure over HTTP (Prometheus,
// Web).
//
// Next, Record and Parse are pure: no I/O and no clock (the caller passes
// the instant). The providers do HTTP only, through the client the caller
// hands them; nothing here writes to a swarm or reads one. The package
// imports nothing of Skep, so render validates a strategy with the same
// rules the pass runs it by. Argo Rollouts' canary steps and analysis
// runs are the model: setWeight, pause and analysis steps; interval,
// count, failureLimit, inconclusiveLimit, consecutiveSuccessLimit,
// consecutiveErrorLimit and initialDelay, with Argo's meaning.
package canary

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Key is the compose extension of a service that holds its strategy.
const Key = "x-skep-canary"

// Bounds of a strategy: far above what a rollout needs, low enough that a
// status or a label holding its state stays small.
const (
	MaxSteps   = 50
	MaxMetrics = 10
)

// Defaults of a metric (see Metric).
const (
	DefaultTimeout               = 10 * time.Second
	DefaultConsecutiveErrorLimit = 4
)

// Strategy is one service's canary: the steps a new spec walks through
// beside the stable one before it replaces it. The zero value has no steps
// and is no strategy.
type Strategy struct {
	Steps []Step
	// MaxFailures is how many of the canary's tasks may fail (or exit and
	// restart) during one step; one more aborts the canary. 0 by default:
	// the first failure aborts.
	MaxFailures int
}

// Step is one step of a strategy: exactly one of its fields is set.
type Step struct {
	// SetWeight is the share of the service's replicas, in percent, that
	// run the new spec once the step is in place (see Replicas).
	SetWeight *int
	Pause     *Pause
	Analysis  *Analysis
}

// Pause waits Duration once the step begins; 0 waits until someone
// promotes or aborts the canary.
type Pause struct{ Duration time.Duration }

// Analysis measures its metrics until each one succeeds, fails or is
// inconclusive: a failure aborts the canary, an inconclusive result pauses
// it until someone promotes or aborts it.
type Analysis struct{ Metrics []Metric }

// Metric is one measurement repeated Count times, Interval apart, after
// InitialDelay: Argo Rollouts' metric, with its limits' meaning. Exactly
// one provider is set.
type Metric struct {
	Name         string
	Interval     time.Duration
	InitialDelay time.Duration
	// Timeout bounds one measurement; DefaultTimeout when not given.
	Timeout time.Duration
	// Count is how many measurements make a success (1 when not given).
	Count int
	// FailureLimit is how many failed measurements are tolerated (one
	// more fails the metric); InconclusiveLimit the same for inconclusive
	// ones; ConsecutiveErrorLimit for measurements that could not be made
	// in a row (DefaultConsecutiveErrorLimit when not given).
	FailureLimit          int
	InconclusiveLimit     int
	ConsecutiveErrorLimit int
	// ConsecutiveSuccessLimit, when above 0, succeeds the metric after
	// that many successful measurements in a row, before Count.
	ConsecutiveSuccessLimit int
	// SuccessCondition and FailureCondition judge one result (see
	// Condition.Judge); with neither, every result that was measured
	// succeeds.
	SuccessCondition *Condition
	FailureCondition *Condition

	Prometheus *Prometheus
	Web        *Web
	// Job names a hook of the release (x-skep-hook: analysis) run as a
	// Swarm job; its exit code is the result.
	Job string
}

// Prometheus queries Address's HTTP API with an instant Query: a scalar
// result is a number, a vector a list of its samples' values in order.
type Prometheus struct {
	Address string
	Query   string
}

// Web is an HTTP GET of URL whose JSON body is the result.
type Web struct {
	URL     string
	Headers map[string]string
}

// Problem is one thing wrong with a strategy: Path names the field from
// the extension down ("steps", "2", "pause"), list indexes as numbers.
type Problem struct {
	Path []string
	Err  error
}

// Field is p's path in the form errors name fields: steps[2].pause.
func (p Problem) Field() string {
	var b strings.Builder
	for _, part := range p.Path {
		if _, err := strconv.Atoi(part); err == nil {
			b.WriteString("[" + part + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		b.WriteString(part)
	}
	return b.String()
}

// metricName is what a metric may be called: it names it in the status
// and the events.
var metricName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Parse reads a strategy from the extension's value as compose's loader
// leaves it (maps, lists, strings, numbers; interpolated strings where
// numbers are wanted are read as numbers). It returns every problem it
// finds; the Strategy is only meaningful when there are none.
func Parse(v any) (Strategy, []Problem) {
	p := parser{}
	m := p.object(v, nil, "maxFailures", "steps")
	var s Strategy
	if m == nil {
		return s, p.problems
	}
	s.MaxFailures = p.count(m, nil, "maxFailures", 0)
	steps, ok := m["steps"].([]any)
	switch {
	case !ok && m["steps"] != nil:
		p.fail([]string{"steps"}, "want a list of steps")
	case len(steps) == 0:
		p.fail([]string{"steps"}, "want at least one step (setWeight, pause or analysis)")
	case len(steps) > MaxSteps:
		p.fail([]string{"steps"}, fmt.Sprintf("%d steps; a strategy has at most %d", len(steps), MaxSteps))
	}
	for i, raw := range steps {
		s.Steps = append(s.Steps, p.step(raw, []string{"steps", strconv.Itoa(i)}))
	}
	return s, p.problems
}

// parser collects the problems of one Parse.
type parser struct{ problems []Problem }

func (p *parser) fail(path []string, msg string) {
	p.problems = append(p.problems, Problem{Path: slices.Clone(path), Err: errors.New(msg)})
}

// object returns v as a map whose keys are all among known, failing for
// anything else; nil when v is no map.
func (p *parser) object(v any, path []string, known ...string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(path, fmt.Sprintf("want a mapping with %s", strings.Join(known, ", ")))
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			p.fail(append(slices.Clone(path), k), fmt.Sprintf("unknown field; want one of %s", strings.Join(known, ", ")))
		}
	}
	return m
}

// step reads one step: a mapping of exactly one kind.
func (p *parser) step(v any, path []string) Step {
	m := p.object(v, path, "setWeight", "pause", "analysis")
	if m == nil {
		return Step{}
	}
	if len(m) != 1 {
		p.fail(path, "want exactly one of setWeight, pause or analysis in a step")
		return Step{}
	}
	var s Step
	switch {
	case has(m, "setWeight"):
		w := p.count(m, path, "setWeight", 0)
		if w > 100 {
			p.fail(append(path, "setWeight"), fmt.Sprintf("want a percentage from 0 to 100, got %d", w))
		}
		s.SetWeight = &w
	case has(m, "pause"):
		s.Pause = p.pause(m["pause"], append(path, "pause"))
	case has(m, "analysis"):
		s.Analysis = p.analysis(m["analysis"], append(path, "analysis"))
	}
	return s
}

// has reports whether m has key, even with a null value.
func has(m map[string]any, key string) bool {
	_, ok := m[key]
	return ok
}

// pause reads a pause: a duration, or a mapping with an optional one; a
// null or empty pause waits until promoted.
func (p *parser) pause(v any, path []string) *Pause {
	switch v := v.(type) {
	case nil:
		return &Pause{}
	case string:
		return &Pause{Duration: p.duration(v, path)}
	}
	m := p.object(v, path, "duration")
	if m == nil || m["duration"] == nil {
		return &Pause{}
	}
	return &Pause{Duration: p.durationOf(m, path, "duration")}
}

// analysis reads an analysis step.
func (p *parser) analysis(v any, path []string) *Analysis {
	m := p.object(v, path, "metrics")
	if m == nil {
		return &Analysis{}
	}
	list, ok := m["metrics"].([]any)
	switch {
	case !ok || len(list) == 0:
		p.fail(append(path, "metrics"), "want a list of at least one metric")
	case len(list) > MaxMetrics:
		p.fail(append(path, "metrics"), fmt.Sprintf("%d metrics; an analysis has at most %d", len(list), MaxMetrics))
	}
	a := &Analysis{}
	seen := map[string]bool{}
	for i, raw := range list {
		at := append(slices.Clone(path), "metrics", strconv.Itoa(i))
		mt := p.metric(raw, at)
		if mt.Name != "" && seen[mt.Name] {
			p.fail(append(at, "name"), fmt.Sprintf("metric %s is named twice in this analysis", mt.Name))
		}
		seen[mt.Name] = true
		a.Metrics = append(a.Metrics, mt)
	}
	return a
}

// metricFields are the fields of a metric, in the order docs list them.
var metricFields = []string{"name", "interval", "count", "initialDelay", "timeout", "failureLimit", "inconclusiveLimit",
	"consecutiveErrorLimit", "consecutiveSuccessLimit", "successCondition", "failureCondition", "prometheus", "web", "job"}

// metric reads one metric of an analysis.
func (p *parser) metric(v any, path []string) Metric {
	m := p.object(v, path, metricFields...)
	if m == nil {
		return Metric{}
	}
	mt := Metric{
		Interval:                p.durationOf(m, path, "interval"),
		InitialDelay:            p.durationOf(m, path, "initialDelay"),
		Timeout:                 p.durationOf(m, path, "timeout"),
		Count:                   p.count(m, path, "count", 1),
		FailureLimit:            p.count(m, path, "failureLimit", 0),
		InconclusiveLimit:       p.count(m, path, "inconclusiveLimit", 0),
		ConsecutiveErrorLimit:   p.count(m, path, "consecutiveErrorLimit", DefaultConsecutiveErrorLimit),
		ConsecutiveSuccessLimit: p.count(m, path, "consecutiveSuccessLimit", 0),
	}
	if mt.Timeout == 0 {
		mt.Timeout = DefaultTimeout
	}
	name, _ := m["name"].(string)
	if !metricName.MatchString(name) {
		p.fail(append(path, "name"), fmt.Sprintf("want a name of lower-case letters, digits and '-', got %q", name))
	}
	mt.Name = name
	if mt.Count < 1 {
		p.fail(append(path, "count"), "want at least 1 measurement")
	}
	if mt.Count > 1 && mt.Interval == 0 {
		p.fail(append(path, "interval"), fmt.Sprintf("count is %d: want an interval between the measurements", mt.Count))
	}
	mt.SuccessCondition = p.condition(m, path, "successCondition")
	mt.FailureCondition = p.condition(m, path, "failureCondition")
	p.provider(m, path, &mt)
	return mt
}

// provider reads the one provider of a metric into mt.
func (p *parser) provider(m map[string]any, path []string, mt *Metric) {
	n := 0
	for _, k := range []string{"prometheus", "web", "job"} {
		if has(m, k) {
			n++
		}
	}
	if n != 1 {
		p.fail(path, "want exactly one provider: prometheus, web or job")
		return
	}
	switch {
	case has(m, "prometheus"):
		at := append(slices.Clone(path), "prometheus")
		o := p.object(m["prometheus"], at, "address", "query")
		if o == nil {
			return
		}
		mt.Prometheus = &Prometheus{Address: p.url(o, at, "address"), Query: p.text(o, at, "query")}
	case has(m, "web"):
		at := append(slices.Clone(path), "web")
		o := p.object(m["web"], at, "url", "headers")
		if o == nil {
			return
		}
		mt.Web = &Web{URL: p.url(o, at, "url"), Headers: p.headers(o["headers"], append(at, "headers"))}
	default:
		mt.Job = p.text(m, path, "job")
	}
}

// text reads a required, non-empty string field.
func (p *parser) text(m map[string]any, path []string, key string) string {
	s, ok := m[key].(string)
	if !ok || strings.TrimSpace(s) == "" {
		p.fail(append(slices.Clone(path), key), "want a non-empty string")
	}
	return strings.TrimSpace(s)
}

// url reads an http or https URL without credentials.
func (p *parser) url(m map[string]any, path []string, key string) string {
	s := p.text(m, path, key)
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		p.fail(append(slices.Clone(path), key), fmt.Sprintf("want an http or https URL, got %q", s))
	case u.User != nil:
		p.fail(append(slices.Clone(path), key), "a URL in git must not hold credentials")
	}
	return s
}

// headers reads a web metric's request headers: a mapping of strings.
func (p *parser) headers(v any, path []string) map[string]string {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(path, "want a mapping of header names to values")
		return nil
	}
	out := map[string]string{}
	for k, val := range m {
		s, ok := val.(string)
		if !ok {
			p.fail(append(slices.Clone(path), k), "want a string")
			continue
		}
		out[k] = s
	}
	return out
}

// condition compiles an optional condition field.
func (p *parser) condition(m map[string]any, path []string, key string) *Condition {
	if m[key] == nil {
		return nil
	}
	s, ok := m[key].(string)
	if !ok {
		p.fail(append(slices.Clone(path), key), "want an expression over result, such as result[0] < 0.05")
		return nil
	}
	c, err := NewCondition(s)
	if err != nil {
		p.problems = append(p.problems, Problem{Path: append(slices.Clone(path), key), Err: err})
		return nil
	}
	return c
}

// count reads a whole number of at least 0 (def when absent), from YAML
// or an interpolated string.
func (p *parser) count(m map[string]any, path []string, key string, def int) int {
	v, ok := m[key]
	if !ok || v == nil {
		return def
	}
	var n int
	switch v := v.(type) {
	case int:
		n = v
	case string:
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
			p.fail(append(slices.Clone(path), key), fmt.Sprintf("want a whole number, got %q", v))
			return def
		}
	default:
		p.fail(append(slices.Clone(path), key), fmt.Sprintf("want a whole number, got %v", v))
		return def
	}
	if n < 0 {
		p.fail(append(slices.Clone(path), key), fmt.Sprintf("want a whole number of at least 0, got %d", n))
		return def
	}
	return n
}

// durationOf reads an optional duration field; 0 when absent.
func (p *parser) durationOf(m map[string]any, path []string, key string) time.Duration {
	v, ok := m[key]
	if !ok || v == nil {
		return 0
	}
	s, ok := v.(string)
	if !ok {
		p.fail(append(slices.Clone(path), key), fmt.Sprintf("want a duration such as 30s or 5m, got %v", v))
		return 0
	}
	return p.duration(s, append(slices.Clone(path), key))
}

// duration reads a positive Go duration.
func (p *parser) duration(s string, path []string) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		p.fail(path, fmt.Sprintf("want a positive duration such as 30s or 5m, got %q", s))
		return 0
	}
	return d
}

// Weights lists the weights s's setWeight steps set, in order.
func (s Strategy) Weights() []int {
	var out []int
	for _, st := range s.Steps {
		if st.SetWeight != nil {
			out = append(out, *st.SetWeight)
		}
	}
	return out
}

// Jobs lists the hooks s's job metrics name, each once, in order.
func (s Strategy) Jobs() []string {
	var out []string
	for _, st := range s.Steps {
		if st.Analysis == nil {
			continue
		}
		for _, m := range st.Analysis.Metrics {
			if m.Job != "" && !slices.Contains(out, m.Job) {
				out = append(out, m.Job)
			}
		}
	}
	return out
}

// String names step s as the status and the events show it.
func (s Step) String() string {
	switch {
	case s.SetWeight != nil:
		return "setWeight " + strconv.Itoa(*s.SetWeight)
	case s.Pause != nil && s.Pause.Duration > 0:
		return "pause " + s.Pause.Duration.String()
	case s.Pause != nil:
		return "pause until promoted"
	case s.Analysis != nil:
		names := make([]string, 0, len(s.Analysis.Metrics))
		for _, m := range s.Analysis.Metrics {
			names = append(names, m.Name)
		}
		return "analysis " + strings.Join(names, ", ")
	}
	return "step"
}
