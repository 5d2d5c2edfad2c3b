# Sourced by swarm2-up and swarm2-down: how they tell their own processes
# by a pid file that may have outlived them.

# cmdline_has PID TEXT: the process's command line mentions TEXT, so a pid
# file left over from before a reboot never names somebody else's process.
cmdline_has() {
  local cmdline
  cmdline=$({ tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null) || return 1
  case "$cmdline" in *"$2"*) return 0 ;; *) return 1 ;; esac
}

# pidfile_has FILE TEXT: FILE names a running process whose command line
# mentions TEXT.
pidfile_has() { [ -f "$1" ] && cmdline_has "$(cat "$1")" "$2"; }
