#!/usr/bin/env bash
# Runs one command line under both cluster launchers asgd supports, K copies each:
#   mpirun --oversubscribe --allow-run-as-root -n K CMD...
#   srun -O -n K CMD...   (on a one-node SLURM cluster started and stopped here)
#
#   tests/cluster/run_under_launchers.sh [-n K] CMD [ARGS...]     (K defaults to 4)
#
# stdout: "### launcher mpirun", the copies' output, "### launcher srun", theirs.
# Exit status: 0 both passed; 1 either failed (each failure is named on
# stderr; both launchers run regardless); 77 cannot run here — not root, or
# mpirun or SLURM/munge not installed (apt-get install -y openmpi-bin slurm-wlm munge).
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
say() { echo "run_under_launchers: $*" >&2; }

k=4
if [ "${1:-}" = "-n" ]; then
  k="${2:-}"
  shift 2 || true
fi
case "$k" in ''|*[!0-9]*|0) say "-n needs a positive count, not '$k'"; exit 2 ;; esac
if [ $# -eq 0 ]; then
  say "usage: run_under_launchers.sh [-n K] CMD [ARGS...]"
  exit 2
fi

if [ "$(id -u)" -ne 0 ]; then
  say "skipped: must run as root (the SLURM daemons run as root here)"
  exit 77
fi
for c in mpirun slurmctld slurmd srun munged; do
  if ! command -v "$c" >/dev/null 2>&1; then
    say "skipped: $c is not installed (apt-get install -y openmpi-bin slurm-wlm munge)"
    exit 77
  fi
done

# The copies must see only the launcher under test: variables inherited from
# an outer allocation (a CI job inside SLURM, say) would be read instead, and
# an outer SLURM_JOB_ID would make srun look for that job in our cluster.
for v in $(compgen -e); do
  case "$v" in SLURM_*|SLURMD_*|SBATCH_*|SALLOC_*|SRUN_*|OMPI_*|PMI_*|PMIX_*) unset "$v" ;; esac
done

limit=120  # seconds per launch: a hung copy fails the run instead of hanging it
failed=""
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# A launch runs in the background so that a signal reaches this script at once
# (bash runs traps only between foreground commands) and is passed on to it.
child=""
# shellcheck disable=SC2317  # called by the INT/TERM trap
on_signal() {
  say "interrupted; stopping the launch"
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child" 2>/dev/null
  fi
  exit 130
}
trap on_signal INT TERM
launch() {  # launch CMD...: its exit status; 124 when it ran past $limit
  # --foreground: timeout signals only the launcher, once. A second signal
  # through the process group makes mpirun abort without stopping its ranks.
  timeout --foreground "$limit" "$@" </dev/null &
  child=$!
  wait "$child"
  local rc=$?
  child=""
  return $rc
}

echo "### launcher mpirun"
t=$(date +%s%N)
launch mpirun --oversubscribe --allow-run-as-root -n "$k" "$@"
rc=$?
if [ $rc -ne 0 ]; then
  say "FAILED: mpirun -n $k $* exited with $rc$([ $rc -eq 124 ] && echo " (killed after ${limit} s)")"
  failed="$failed mpirun"
else
  say "mpirun -n $k: ok in $(ms "$t") ms"
fi

D="$(mktemp -d /tmp/asgd-slurm.XXXXXX)"
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  local t
  t=$(date +%s%N)
  "$here/slurm_down.sh" "$D"
  say "SLURM stopped in $(ms "$t") ms"
}
trap cleanup EXIT
t=$(date +%s%N)
env_lines="$("$here/slurm_up.sh" "$D")"
rc=$?
if [ $rc -ne 0 ]; then
  say "FAILED: could not start SLURM under $D (slurm_up.sh exited with $rc)"
  [ $rc -eq 77 ] && exit 77
  exit 1
fi
eval "$env_lines"
say "SLURM started in $(ms "$t") ms"

echo "### launcher srun"
t=$(date +%s%N)
launch srun -O -n "$k" --kill-on-bad-exit=1 "$@"
rc=$?
if [ $rc -ne 0 ]; then
  say "FAILED: srun -O -n $k $* exited with $rc$([ $rc -eq 124 ] && echo " (killed after ${limit} s)")"
  failed="$failed srun"
else
  say "srun -n $k: ok in $(ms "$t") ms"
fi

if [ -n "$failed" ]; then
  say "failed under:$failed"
  exit 1
fi
exit 0
