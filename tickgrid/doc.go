// Package tickgrid aligns a process's periodic work to shared instants:
// every period's grid starts at the same origin, the process's start, so
// that loops on one period (or on multiples of one) come due together.
// A controller at rest then wakes once for all of them instead of once
// per loop: on a small machine, each wake-up from idle (the scheduler's,
// and the runtime's monitor polling at 20 µs for a millisecond after it)
// cost more than the work it woke for.
//
// It only computes instants: it must never sleep, start goroutines or
// read anything but the clock's start.
package tickgrid
