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

stop() {
  local ts=$(date +%s%N)  # stop PIDFILE COMM: SIGTERM, then SIGKILL after 5 s
  local pid
  pid=$(pid_of "$1" "$2") || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    [ -d "/proc/$pid" ] || { echo "$2 $(( ($(date +%s%N)-ts)/1000000 ))ms" >&2; return 0; }
    sleep 0.1
  done
  say "$2 (pid $pid) ignored SIGTERM for 5 s; killing it"
  kill -KILL "$pid" 2>/dev/null
  sleep 0.1
}

# Jobs first, so slurmd does not leave job steps running.
if pid_of "$D/slurmctld.pid" slurmctld >/dev/null && [ -f "$D/slurm.conf" ]; then
  SLURM_CONF="$D/slurm.conf" timeout 5 scancel --user=root --full >/dev/null 2>&1 || true
fi
stop "$D/slurmd.pid" slurmd
stop "$D/slurmctld.pid" slurmctld
if pid_of "$D/munge/munged.pid" munged >/dev/null; then
  timeout 5 munged --stop --socket="$D/munge/munge.socket" >/dev/null 2>&1 || true
  stop "$D/munge/munged.pid" munged
fi
rm -rf -- "$D"
say "down in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
