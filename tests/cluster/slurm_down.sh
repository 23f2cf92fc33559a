#!/usr/bin/env bash
# Stops the one-node SLURM cluster that slurm_up.sh started under DIR and deletes
# DIR. Safe to run again, on a half-started cluster, or on a DIR that is gone.
# Only processes named by DIR's pid files are signalled, and only when the pid
# still belongs to the daemon it names.
#   tests/cluster/slurm_down.sh [DIR]    (DIR as for slurm_up.sh)
# Exit status: 0 down (or nothing to stop); 1 DIR is not a cluster slurm_up.sh made.
set -uo pipefail

D="${1:-${ASGD_SLURM_DIR:-/tmp/asgd-slurm}}"
say() { echo "slurm_down: $*" >&2; }

if [ ! -e "$D" ]; then
  exit 0
fi
if [ ! -f "$D/.asgd-slurm" ]; then
  say "$D was not made by slurm_up.sh (no .asgd-slurm marker); not touching it"
  exit 1
fi
t0=$(date +%s%N)

pid_of() {  # pid_of PIDFILE COMM: prints the pid when it is running and is COMM
  local pid
  [ -s "$1" ] || return 1
  pid="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  echo "$pid"
}

running() {  # a zombie has exited: only its parent's wait is missing
  local st
  st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

# stop PIDFILE:COMM...: SIGTERM to all at once (each takes about 2 s to shut
# down; in turn they took 6), then SIGKILL whatever is left after 5 s.
stop() {
  local pids="" pid spec
  for spec in "$@"; do
    pid=$(pid_of "${spec%%:*}" "${spec##*:}") || continue
    kill -TERM "$pid" 2>/dev/null && pids="$pids $pid"
  done
  for _ in $(seq 100); do
    local left=""
    for pid in $pids; do running "$pid" && left="$left $pid"; done
    pids="$left"
    [ -z "$pids" ] && return 0
    sleep 0.05
  done
  say "pids$pids ignored SIGTERM for 5 s; killing them"
  # shellcheck disable=SC2086  # one word per pid
  kill -KILL $pids 2>/dev/null
  sleep 0.1
}

# Jobs first, so slurmd does not leave job steps running.
if pid_of "$D/slurmctld.pid" slurmctld >/dev/null && [ -f "$D/slurm.conf" ]; then
  SLURM_CONF="$D/slurm.conf" timeout 5 scancel --user=root --full >/dev/null 2>&1 || true
fi
stop "$D/slurmd.pid:slurmd" "$D/slurmctld.pid:slurmctld" "$D/munge/munged.pid:munged"
rm -rf -- "$D"
say "down in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
