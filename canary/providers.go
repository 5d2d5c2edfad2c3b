package canary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxBody bounds what a provider reads of an answer.
const maxBody = 1 << 20

// Measure asks p's Prometheus for its query at this instant, within ctx,
// through client: a scalar answer is a float64, a vector one a []any of
// its samples' values (float64) in the order Prometheus gave them, empty
// when nothing matched. Any other result type, an error status or an
// answer that does not decode is an error naming the address (without
// credentials, which an address may not hold anyway).
func (p Prometheus) Measure(ctx context.Context, client *http.Client) (any, error) {
	u, err := url.Parse(strings.TrimSuffix(p.Address, "/") + "/api/v1/query")
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", p.Address, err)
	}
	u.RawQuery = url.Values{"query": {p.Query}}.Encode()
	var answer struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, client, u.String(), nil, true, &answer); err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", p.Address, err)
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("prometheus %s: %s: %s", p.Address, answer.ErrorType, answer.Error)
	}
	switch answer.Data.ResultType {
	case "scalar":
		var sample [2]any
		if err := json.Unmarshal(answer.Data.Result, &sample); err != nil {
			return nil, fmt.Errorf("prometheus %s: scalar: %w", p.Address, err)
		}
		return sampleValue(sample[1])
	case "vector":
		var vec []struct {
			Value [2]any `json:"value"`
		}
		if err := json.Unmarshal(answer.Data.Result, &vec); err != nil {
			return nil, fmt.Errorf("prometheus %s: vector: %w", p.Address, err)
		}
		out := make([]any, 0, len(vec))
		for _, s := range vec {
			v, err := sampleValue(s.Value[1])
			if err != nil {
				return nil, fmt.Errorf("prometheus %s: %w", p.Address, err)
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("prometheus %s: result type %q; want a scalar or a vector", p.Address, answer.Data.ResultType)
}

// sampleValue reads a sample's value, which Prometheus sends as a string
// ("0.25", "NaN", "+Inf").
func sampleValue(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is no string", v)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("sample value %q: %w", s, err)
	}
	return f, nil
}

// Measure asks w's URL within ctx, through client; the result is its JSON
// body, decoded (numbers as float64). A status other than 2xx is an error.
func (w Web) Measure(ctx context.Context, client *http.Client) (any, error) {
	var out any
	if err := getJSON(ctx, client, w.URL, w.Headers, false, &out); err != nil {
		return nil, fmt.Errorf("web %s: %w", redact(w.URL), err)
	}
	return out, nil
}

// getJSON GETs u with headers and decodes its JSON body, at most maxBody
// bytes, into out; with errorBody, a 400 answer's JSON body is decoded too
// (Prometheus says why it refused a query in one).
func getJSON(ctx context.Context, client *http.Client, u string, headers map[string]string, errorBody bool, out any) error {
	if client == nil {
		return errors.New("no HTTP client to measure with")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return err
	}
	if len(body) > maxBody {
		return fmt.Errorf("answer larger than %d bytes", maxBody)
	}
	if resp.StatusCode/100 != 2 && !(errorBody && resp.StatusCode == http.StatusBadRequest && json.Valid(body)) {
		return fmt.Errorf("status %s", resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("answer is no JSON: %w", err)
	}
	return nil
}

// redact is u without a query string, which may carry a token.
func redact(u string) string {
	before, _, _ := strings.Cut(u, "?")
	return before
}
