package harness

import (
	"context"
	"testing"
	"time"
)

// Eventually polls cond every interval until it returns true, and fails the
// test with the last message cond gave when timeout passes or the test's
// context ends. cond returns (done, why-not).
// It checks at once, then every 250ms. cond gets a context that ends at
// the timeout, and should bound its own calls with it.
func Eventually(t testing.TB, timeout time.Duration, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	why := "never checked"
	for {
		ok, msg := cond(ctx)
		if ok {
			return
		}
		why = msg
		select {
		case <-ctx.Done():
			// Fatalf, from the test's goroutine only: Eventually must not be called
			// from another goroutine (testing.T.FailNow's rule).
			t.Fatalf("condition not met within %s: %s", timeout, why)
		case <-tick.C:
		}
	}
}
