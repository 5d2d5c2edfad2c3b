package tickgrid

import "time"

// origin is where every grid starts: the process's start, not the Unix
// epoch, so that controllers started apart (several swarms, one git
// server) do not all ask at the same instants.
var origin = time.Now()

// Next returns the first instant of period's grid (origin + k·period)
// later than now + period/2: a loop that ran at one instant of the grid
// and waits for Next runs at the next one, however long it took up to
// half a period, and one that ran off the grid (woken for another reason)
// waits between half a period and a period and a half. A period of zero
// or less returns now.
func Next(now time.Time, period time.Duration) time.Time {
	if period <= 0 {
		return now
	}
	// The grid runs both ways from the origin: a clock of another kind
	// (a test's fake one) may read earlier.
	elapsed := now.Add(period / 2).Sub(origin)
	k := elapsed / period
	if elapsed%period < 0 {
		k-- // the floor, not the truncation toward zero
	}
	return origin.Add((k + 1) * period)
}

// NextAt is Next on period's grid moved by offset: the first instant
// origin + offset + k·period later than now + period/2. Loops of one
// period with different offsets take turns instead of coming due together.
func NextAt(now time.Time, period, offset time.Duration) time.Time {
	return Next(now.Add(-offset), period).Add(offset)
}

// Until is how long from now until Next(now, period).
func Until(now time.Time, period time.Duration) time.Duration {
	return Next(now, period).Sub(now)
}

// Round returns the instant of step's grid nearest to t.
func Round(t time.Time, step time.Duration) time.Time {
	if step <= 0 {
		return t
	}
	since := t.Sub(origin)
	k := since / step
	if rest := since - k*step; rest >= step/2 {
		k++
	} else if rest < -step/2 {
		k--
	}
	return origin.Add(k * step)
}
