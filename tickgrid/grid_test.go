package tickgrid

import (
	"testing"
	"time"
)

func TestNextIsOnTheGridAndAfterHalfAPeriod(t *testing.T) {
	for _, period := range []time.Duration{10 * time.Second, 30 * time.Second, 90 * time.Second, 1500 * time.Millisecond} {
		for _, offset := range []time.Duration{-3*period - period/4, -period / 2, -1, 0, time.Millisecond, period / 3, period/2 - 1, period / 2, period/2 + 1, period - 1, period, 7*period + period/4} {
			now := origin.Add(offset)
			next := Next(now, period)
			if since := next.Sub(origin); since%period != 0 {
				t.Errorf("Next(origin+%s, %s) = origin+%s, not on the grid", offset, period, since)
			}
			if wait := next.Sub(now); wait <= period/2 || wait > period+period/2 {
				t.Errorf("Next(origin+%s, %s) is %s away, want in (%s, %s]", offset, period, wait, period/2, period+period/2)
			}
			if got := Until(now, period); got != next.Sub(now) {
				t.Errorf("Until = %s, Next is %s away", got, next.Sub(now))
			}
		}
	}
}

func TestALoopOnTheGridKeepsItsStep(t *testing.T) {
	period := 30 * time.Second
	at := Next(origin, period)
	for range 5 {
		// Each run takes a moment; the next is still one period on.
		next := Next(at.Add(250*time.Millisecond), period)
		if next.Sub(at) != period {
			t.Fatalf("after a run at origin+%s the next is %s later, want %s", at.Sub(origin), next.Sub(at), period)
		}
		at = next
	}
}

func TestGridsOfMultiplePeriodsMeet(t *testing.T) {
	// A 30 s loop's instants are every third of a 10 s loop's.
	now := origin.Add(95 * time.Second)
	if a, b := Next(now, 30*time.Second), Next(now.Add(10*time.Second), 10*time.Second); !a.Equal(b) {
		t.Fatalf("the 30 s grid's next instant origin+%s is not on the 10 s grid's (origin+%s)", a.Sub(origin), b.Sub(origin))
	}
}

func TestAClockReadingLongBeforeTheOriginStillTicks(t *testing.T) {
	// A fake clock (testing/synctest's starts in 2000) reads years before
	// the process started; its loops still wait one period, not years.
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if wait := Until(now, time.Minute); wait <= 30*time.Second || wait > 90*time.Second {
		t.Fatalf("Until(2000-01-01, 1m) = %s", wait)
	}
}

func TestNoPeriodIsNow(t *testing.T) {
	now := time.Now()
	if got := Next(now, 0); !got.Equal(now) {
		t.Fatalf("Next(now, 0) = %v, want now", got)
	}
}

func TestRoundIsTheNearestInstant(t *testing.T) {
	step := time.Second
	for offset, want := range map[time.Duration]time.Duration{
		0:                       0,
		400 * time.Millisecond:  0,
		500 * time.Millisecond:  time.Second,
		1700 * time.Millisecond: 2 * time.Second,
		30 * time.Second:        30 * time.Second,
		-300 * time.Millisecond: 0,
		-700 * time.Millisecond: -time.Second,
	} {
		if got := Round(origin.Add(offset), step).Sub(origin); got != want {
			t.Errorf("Round(origin%+v, 1s) = origin%+v, want origin%+v", offset, got, want)
		}
	}
	// An instant of a whole-second period's grid stays where it is.
	at := Next(origin.Add(time.Minute), 30*time.Second)
	if got := Round(at, step); !got.Equal(at) {
		t.Fatalf("Round moved a 30 s grid instant by %s", got.Sub(at))
	}
}

func TestNextAtIsNextMovedByTheOffset(t *testing.T) {
	period := 30 * time.Second
	for _, offset := range []time.Duration{0, 7 * time.Second, period - time.Second} {
		for _, at := range []time.Duration{-period, 0, time.Second, 14 * time.Second, 16 * time.Second, 95 * time.Second} {
			now := origin.Add(at)
			next := NextAt(now, period, offset)
			if since := next.Sub(origin) - offset; since%period != 0 {
				t.Errorf("NextAt(origin+%s, %s, %s) = origin+%s, not on the grid moved by the offset", at, period, offset, next.Sub(origin))
			}
			if wait := next.Sub(now); wait <= period/2 || wait > period+period/2 {
				t.Errorf("NextAt(origin+%s, %s, %s) is %s away, want in (%s, %s]", at, period, offset, wait, period/2, period+period/2)
			}
		}
	}
}
