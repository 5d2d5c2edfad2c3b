package memtrim

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Executable advises the kernel to map the read-only mappings of the
// running executable page by page (MADV_RANDOM: no fault-around, no
// read-ahead) and drops their pages now (MADV_DONTNEED). It returns how
// many mappings it advised.
func Executable() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("own executable: %w", err)
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("own mappings: %w", err)
	}
	defer maps.Close()
	var ranges [][2]uintptr
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		if r, ok := readOnlyRange(sc.Text(), exe); ok {
			ranges = append(ranges, r)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("own mappings: %w", err)
	}
	// Advised only after the file is read: the scanner's own buffer is
	// not in these mappings, but nothing runs between the two loops that
	// another thread's fault could not serve anyway.
	for i, r := range ranges {
		for _, advice := range []uintptr{syscall.MADV_RANDOM, syscall.MADV_DONTNEED} {
			if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, r[0], r[1]-r[0], advice); errno != 0 {
				return i, fmt.Errorf("madvise %#x-%#x: %w", r[0], r[1], errno)
			}
		}
	}
	return len(ranges), nil
}

// readOnlyRange parses one line of /proc/self/maps and returns its address
// range when it maps exe privately and without write access: its pages
// are the file's, and reading them again gives the same bytes.
func readOnlyRange(line, exe string) ([2]uintptr, bool) {
	fields := strings.Fields(line)
	// address perms offset dev inode path; a path holding spaces is
	// never the executable's, which Readlink returned whole.
	if len(fields) != 6 || fields[5] != exe {
		return [2]uintptr{}, false
	}
	if perms := fields[1]; len(perms) != 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
		return [2]uintptr{}, false
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return [2]uintptr{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return [2]uintptr{}, false
	}
	return [2]uintptr{uintptr(start), uintptr(end)}, true
}
