// Package memtrim keeps a long-running process's resident set to what it
// uses: on Linux it has the kernel map the process's own executable (code
// and read-only data) one page at a time, instead of the 64 KiB runs it
// maps around each first touch by default, and drops what start-up mapped;
// and once a burst of work is over (Settle) it gives the heap's free pages
// back and drops the executable's pages again. Pages in use fault back in
// from the page cache as they run.
//
// It must never touch a mapping that is not of the process's own
// executable, nor one that can be written: only pages the kernel can read
// again from the file are dropped. It must never trim while the process
// is busy: a trim costs a full GC.
package memtrim
