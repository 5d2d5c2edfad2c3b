package reconcile

// tickFrame is how much stack growStack asks for at once: with the
// runtime's guard, the goroutine's stack becomes 32 KiB, which held
// nearly every quiet tick (stack copies fell from a tenth of its
// profile's samples to 2 %).
const tickFrame = 16 << 10

// growStack makes the goroutine that calls it, at its start, take the
// stack a tick needs in one step. Each tick runs on a goroutine of its
// own (its timer's), whose stack starts small; grown on demand it was
// copied several times a tick, each time deep inside the git client
// with every frame to adjust: a tenth of a quiet tick's CPU in a
// profile. Copied here, at the top of the goroutine, there are two
// frames to move. i is 0; taking it as an argument keeps the compiler
// from dropping the frame.
//
//go:noinline
func growStack(i int) byte {
	var frame [tickFrame]byte
	frame[i] = 1
	return frame[len(frame)-1-i]
}
