package bench

import (
	"testing"
	"time"
)

func TestAntitheticPhasesTakeOneInEachSliceAndMirrorEachOther(t *testing.T) {
	interval := 10 * time.Second
	for _, n := range []int{1, 2, 5, 10} {
		slice := interval / time.Duration(n)
		byslice := make(map[int]time.Duration)
		for _, p := range antitheticPhases(n, interval) {
			k := int(p / slice)
			if p < 0 || k >= n {
				t.Fatalf("n=%d: phase %s outside the interval", n, p)
			}
			if _, dup := byslice[k]; dup {
				t.Fatalf("n=%d: two phases in slice %d", n, k)
			}
			byslice[k] = p
		}
		if len(byslice) != n {
			t.Fatalf("n=%d: %d slices drawn, want %d", n, len(byslice), n)
		}
		for k := range n {
			// Each pair of mirror slices averages to half the interval.
			if sum := byslice[k] + byslice[n-1-k]; sum < interval-time.Microsecond || sum > interval+time.Microsecond {
				t.Errorf("n=%d: slices %d and %d drew %s and %s, which sum to %s, want %s", n, k, n-1-k, byslice[k], byslice[n-1-k], sum, interval)
			}
		}
	}
}
