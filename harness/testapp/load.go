package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// faults are what the environment makes GET / do wrong: fail a share of
// the answers (TESTAPP_ERROR_RATE, 0 to 1) and take at least latency
// (TESTAPP_LATENCY).
type faults struct {
	errorRate float64
	latency   time.Duration
}

// faultsFromEnv reads the faults; unset means none.
func faultsFromEnv() (faults, error) {
	var f faults
	if v := os.Getenv("TESTAPP_ERROR_RATE"); v != "" {
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil || rate < 0 || rate > 1 {
			return f, fmt.Errorf("TESTAPP_ERROR_RATE: want a share from 0 to 1, got %q", v)
		}
		f.errorRate = rate
	}
	if v := os.Getenv("TESTAPP_LATENCY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return f, fmt.Errorf("TESTAPP_LATENCY: want a duration, got %q", v)
		}
		f.latency = d
	}
	return f, nil
}

// fail reports whether this answer is one of the failed share.
func (f faults) fail() bool { return f.errorRate > 0 && rand.Float64() < f.errorRate }

// counter counts the answers of GET / for /metrics.
type counter struct {
	version string
	mu      sync.Mutex
	codes   map[int]int
	seconds float64
	n       int
}

func newCounter(version string) *counter { return &counter{version: version, codes: map[int]int{}} }

func (c *counter) add(code int, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.codes[code]++
	c.seconds += took.Seconds()
	c.n++
}

// serve writes the counts in Prometheus's text format: requests by
// version and code, and a summary of their durations (sum and count).
func (c *counter) serve(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# HELP testapp_requests_total Answers of GET /, by version and status code.")
	fmt.Fprintln(w, "# TYPE testapp_requests_total counter")
	// Both series exist from the start, so a rate over them is 0, not
	// nothing, before the first failure.
	for _, code := range []int{http.StatusOK, http.StatusInternalServerError} {
		c.codes[code] += 0
	}
	for _, code := range sortedKeys(c.codes) {
		fmt.Fprintf(w, "testapp_requests_total{version=%q,code=\"%d\"} %d\n", c.version, code, c.codes[code])
	}
	fmt.Fprintln(w, "# HELP testapp_request_duration_seconds What GET / took.")
	fmt.Fprintln(w, "# TYPE testapp_request_duration_seconds summary")
	fmt.Fprintf(w, "testapp_request_duration_seconds_sum{version=%q} %g\n", c.version, c.seconds)
	fmt.Fprintf(w, "testapp_request_duration_seconds_count{version=%q} %d\n", c.version, c.n)
}

func sortedKeys(m map[int]int) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// stats is what the load command counted, as GET /stats answers it:
// answers by the version that gave them, failed ones (5xx) among them,
// and requests that got no answer.
type stats struct {
	Versions map[string]int `json:"versions"`
	Failed   map[string]int `json:"failed"`
	Errors   int            `json:"errors"`
	// Resolved counts the addresses of the last look-up.
	Resolved int `json:"resolved"`
}

// load sends GET / to $TESTAPP_TARGET (host:port) at $TESTAPP_RATE
// requests a second (default 20), looking the host up again for each
// request and taking one of its addresses at random, as a client of DNS
// round robin does; it serves /healthz and /stats on addr until stopped.
func load(addr string) int {
	target := os.Getenv("TESTAPP_TARGET")
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testapp load: TESTAPP_TARGET: want host:port, got", target)
		return 2
	}
	rate := 20
	if v := os.Getenv("TESTAPP_RATE"); v != "" {
		if rate, err = strconv.Atoi(v); err != nil || rate <= 0 {
			fmt.Fprintln(os.Stderr, "testapp load: TESTAPP_RATE: want a positive number, got", v)
			return 2
		}
	}
	var mu sync.Mutex
	st := stats{Versions: map[string]int{}, Failed: map[string]int{}}
	go func() {
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for tick := time.NewTicker(time.Second / time.Duration(rate)); ; <-tick.C {
			version, code, resolved, err := once(client, host, port)
			mu.Lock()
			st.Resolved = resolved
			switch {
			case err != nil:
				st.Errors++
			default:
				st.Versions[version]++
				if code >= 500 {
					st.Failed[version]++
				}
			}
			mu.Unlock()
		}
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewEncoder(w).Encode(st)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "testapp load:", err)
		return 1
	}
	return 0
}

// once looks host up, asks one of its addresses for GET / and returns the
// version and status code of the answer, and how many addresses the
// look-up gave.
func once(client *http.Client, host, port string) (string, int, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return "", 0, 0, err
	}
	if len(addrs) == 0 {
		return "", 0, 0, errors.New("no address")
	}
	pick := addrs[rand.IntN(len(addrs))]
	resp, err := client.Get("http://" + net.JoinHostPort(pick, port) + "/")
	if err != nil {
		return "", 0, len(addrs), err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", 0, len(addrs), err
	}
	var r reply
	if err := json.Unmarshal(body, &r); err != nil {
		return "", 0, len(addrs), fmt.Errorf("answer %q: %w", strings.TrimSpace(string(body)), err)
	}
	return r.Version, resp.StatusCode, len(addrs), nil
}
