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
