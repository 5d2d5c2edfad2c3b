//go:build !linux

package memtrim

// Executable does nothing where the kernel's mapping cannot be advised.
func Executable() (int, error) { return 0, nil }
