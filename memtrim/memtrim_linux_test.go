package memtrim

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile is the file-backed part of this process's resident set, in kB.
func rssFile(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestExecutableDropsTheBinarysPagesAndTheProcessRunsOn(t *testing.T) {
	before := rssFile(t)
	n, err := Executable()
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Errorf("advised %d mappings, want the executable's code and read-only data at least", n)
	}
	after := rssFile(t)
	// What the test itself runs after the call comes back in, so not to
	// zero, but well below.
	if after >= before*3/4 {
		t.Errorf("RssFile %d kB before, %d kB after: the executable's pages were not dropped", before, after)
	}
}

func TestReadOnlyRangeTakesOnlyTheExecutablesUnwritableMappings(t *testing.T) {
	exe := "/usr/local/bin/skep"
	for line, want := range map[string]bool{
		"00400000-015b8000 r-xp 00000000 fe:00 9986107 /usr/local/bin/skep":             true,
		"015b8000-028cf000 r--p 011b8000 fe:00 9986107 /usr/local/bin/skep":             true,
		"028cf000-029a2000 rw-p 024cf000 fe:00 9986107 /usr/local/bin/skep":             false, // data: written pages would be lost
		"7f0000000000-7f0000001000 r--s 00000000 fe:00 1 /usr/local/bin/skep":           false, // shared
		"7f0000000000-7f0000001000 r--p 00000000 fe:00 1 /usr/lib/libc.so":              false,
		"7f0000000000-7f0000001000 rw-p 00000000 00:00 0":                               false, // anonymous
		"7f0000000000-7f0000001000 r--p 00000000 fe:00 1 /usr/local/bin/skep (deleted)": false,
		"zz-015b8000 r--p 011b8000 fe:00 9986107 /usr/local/bin/skep":                   false,
		"015b8000-00400000 r--p 011b8000 fe:00 9986107 /usr/local/bin/skep":             false,
	} {
		if _, got := readOnlyRange(line, exe); got != want {
			t.Errorf("readOnlyRange(%q) = %v, want %v", line, got, want)
		}
	}
}
