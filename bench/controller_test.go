package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRendersReadsBothCountersFromOneScrape: renders are every reconcile
// of every application and outcome but the quiet ones, as one scrape
// reports them.
func TestRendersReadsBothCountersFromOneScrape(t *testing.T) {
	scrapes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		scrapes++
		// Each scrape is 10 ticks later, 7 of them quiet.
		fmt.Fprintf(w, "# HELP skep_reconcile_total x\n"+
			"skep_reconcile_total{application=\"a\",outcome=\"ok\",swarm=\"\"} %d\n"+
			"skep_reconcile_total{application=\"b\",outcome=\"stalled\",swarm=\"\"} 4\n"+
			"skep_reconcile_quiet_total %d\n"+
			"skep_reconcile_quiet_totals_other 99\n", 20+10*scrapes, 11+7*scrapes)
	}))
	defer srv.Close()
	c := &Controller{URL: srv.URL, token: "tok"}
	for _, want := range []float64{34 - 18, 44 - 25} {
		got, err := c.Renders(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("renders = %v, want %v", got, want)
		}
	}
	if scrapes != 2 {
		t.Errorf("%d scrapes for two reads, want one each", scrapes)
	}
}

// TestScrapeHelpersReadTheirSeries: the per-application reconciles and an
// unlabelled gauge, among series whose labels hold spaces and braces.
func TestScrapeHelpersReadTheirSeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE go_memstats_heap_inuse_bytes gauge\n"+
			"go_memstats_heap_inuse_bytes 5.24288e+06\n"+
			"go_memstats_heap_inuse_bytes_total{x=\"y\"} 1\n"+
			"skep_api_requests_total{code=\"200\",route=\"GET /api/v1/{name}\"} 3\n"+
			"skep_reconcile_total{application=\"a\",outcome=\"ok\",swarm=\"\"} 5\n"+
			"skep_reconcile_total{application=\"a\",outcome=\"transient\",swarm=\"\"} 2\n"+
			"skep_reconcile_total{application=\"b\",outcome=\"ok\",swarm=\"prod\"} 1\n")
	}))
	defer srv.Close()
	c := &Controller{URL: srv.URL, token: "tok"}
	heap, err := c.HeapInUse(t.Context())
	if err != nil || heap != 5<<20 {
		t.Errorf("HeapInUse = %d, %v; want %d", heap, err, 5<<20)
	}
	got, err := c.Reconciles(t.Context())
	if err != nil || len(got) != 2 || got["a"] != 7 || got["b"] != 1 {
		t.Errorf("Reconciles = %v, %v; want a: 7, b: 1", got, err)
	}
	if _, err := c.gauge(t.Context(), "skep_sse_subscribers"); err == nil {
		t.Error("a gauge missing from /metrics read without an error")
	}
}
