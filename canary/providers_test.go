package canary

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// prometheusAnswering serves /api/v1/query with answer, checking the query.
func prometheusAnswering(t *testing.T, query string, status int, answer string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.URL.Query().Get("query") != query {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestPrometheusMeasuresScalarsAndVectors(t *testing.T) {
	const q = `sum(rate(x{code=~"5.."}[1m]))`
	for _, tc := range []struct {
		name    string
		status  int
		answer  string
		want    any
		wantErr string
	}{
		{name: "a vector is its samples' values", status: 200,
			answer: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.25"]},{"metric":{"a":"b"},"value":[1,"2"]}]}}`,
			want:   []any{0.25, 2.0}},
		{name: "an empty vector is an empty list", status: 200,
			answer: `{"status":"success","data":{"resultType":"vector","result":[]}}`, want: []any{}},
		{name: "a scalar is a number", status: 200,
			answer: `{"status":"success","data":{"resultType":"scalar","result":[1,"0.5"]}}`, want: 0.5},
		{name: "a refused query says why", status: 400,
			answer: `{"status":"error","errorType":"bad_data","error":"parse error"}`, wantErr: "bad_data: parse error"},
		{name: "a matrix is refused", status: 200,
			answer: `{"status":"success","data":{"resultType":"matrix","result":[]}}`, wantErr: `result type "matrix"`},
		{name: "a server error is an error", status: 502, answer: `bad gateway`, wantErr: "status 502"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Prometheus{Address: prometheusAnswering(t, q, tc.status, tc.answer) + "/", Query: q}
			got, err := p.Measure(t.Context(), http.DefaultClient)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Measure() = %v, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Measure() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrometheusNaNIsANumber(t *testing.T) {
	p := Prometheus{Address: prometheusAnswering(t, "q", 200, `{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`), Query: "q"}
	got, err := p.Measure(t.Context(), http.DefaultClient)
	if f, ok := got.(float64); err != nil || !ok || !math.IsNaN(f) {
		t.Fatalf("Measure() = %v, %v; want NaN", got, err)
	}
}

func TestWebMeasuresAJSONBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "t" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"data":{"ok":true,"rate":0.99}}`))
	}))
	defer srv.Close()
	got, err := Web{URL: srv.URL + "/ready?token=secret", Headers: map[string]string{"X-Token": "t"}}.Measure(t.Context(), http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	m := Metric{SuccessCondition: condition(t, "result.data.ok && result.data.rate > 0.95")}
	if phase, err := m.Judge(got); phase != PhaseSuccessful || err != nil {
		t.Errorf("Judge(%v) = %v, %v", got, phase, err)
	}
	_, err = Web{URL: srv.URL + "/ready?token=secret"}.Measure(t.Context(), http.DefaultClient)
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "401") {
		t.Errorf("unauthorized: %v; want the status, and no query string", err)
	}
}
