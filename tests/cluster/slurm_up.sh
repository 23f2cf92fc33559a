#!/usr/bin/env bash
# Starts a one-node SLURM cluster (munged, slurmctld, slurmd) under DIR, as root.
#
#   eval "$(tests/cluster/slurm_up.sh [DIR])"    # then: srun -O -n 4 CMD
#   tests/cluster/slurm_down.sh [DIR]
#
# DIR defaults to $ASGD_SLURM_DIR, else /tmp/asgd-slurm. Everything the cluster
# writes (munge key and socket, slurm.conf, state, spool, logs, pid files) lives
# under DIR, and the daemons listen on free ports picked here, so several clusters
# (one per DIR) can run side by side and nothing outside DIR is touched. Debian's
# service scripts are not used: they do not work in containers.
#
# stdout: `export SLURM_CONF=...` lines (also written to DIR/env); diagnostics go
# to stderr. Running it again on a DIR that is up prints the same lines; a DIR
# left half-up by a crash is torn down and started afresh.
# Exit status: 0 up; 77 cannot run here (not root, packages missing); 1 failed.
set -euo pipefail

D="${1:-${ASGD_SLURM_DIR:-/tmp/asgd-slurm}}"
here="$(cd "$(dirname "$0")" && pwd)"
say() { echo "slurm_up: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  say "must run as root (slurmd starts job steps as their user; munged runs as user munge)"
  exit 77
fi
missing=""
for c in munged mungekey slurmctld slurmd slurmstepd srun sinfo scontrol scancel runuser; do
  command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
done
getent passwd munge >/dev/null 2>&1 || missing="$missing user:munge"
if [ -n "$missing" ]; then
  say "missing:$missing — install them with: apt-get install -y slurm-wlm munge"
  exit 77
fi

case "$D" in
  /*) ;;
  *) D="$(pwd)/$D" ;;
esac

alive() {  # alive PIDFILE COMM: the pid in PIDFILE is running and is COMM
  local pid
  [ -s "$1" ] || return 1
  pid="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

if [ -f "$D/.asgd-slurm" ]; then
  if alive "$D/munge/munged.pid" munged && alive "$D/slurmctld.pid" slurmctld && alive "$D/slurmd.pid" slurmd \
     && [ -s "$D/env" ]; then
    say "already up under $D"
    cat "$D/env"
    exit 0
  fi
  say "$D holds a cluster that is not fully up; tearing it down first"
  "$here/slurm_down.sh" "$D" >&2
elif [ -e "$D" ] && [ -n "$(ls -A "$D" 2>/dev/null)" ]; then
  say "$D exists, is not empty and is not a cluster this script made; pick another DIR"
  exit 1
fi

t0=$(date +%s%N)
install -d -m 0755 "$D"
: >"$D/.asgd-slurm"  # marks DIR as ours, so slurm_down.sh may delete it
fail() {
  say "$*"
  for f in "$D/munge/munged.log" "$D/slurmctld.log" "$D/slurmd.log"; do
    [ -s "$f" ] && { echo "---- tail $f" >&2; tail -n 15 "$f" >&2; }
  done
  "$here/slurm_down.sh" "$D" >&2 || true
  exit 1
}

# munge: the key and socket directory must belong to munge; 0700 makes the
# socket unreachable for root's clients, so 0711.
install -d -o munge -g munge -m 0711 "$D/munge"
mungekey --create --keyfile="$D/munge/munge.key" >/dev/null 2>&1 || fail "mungekey --create failed"
chown munge:munge "$D/munge/munge.key"
runuser -u munge -- munged --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
  --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" \
  || fail "munged did not start"
for _ in $(seq 100); do [ -S "$D/munge/munge.socket" ] && break; sleep 0.05; done
[ -S "$D/munge/munge.socket" ] || fail "munged's socket $D/munge/munge.socket did not appear"

# Two free TCP ports: below the kernel's ephemeral range (so no connection of
# another process can be holding one as its local port by then) and in no
# state at all now according to /proc/net/tcp{,6}.
in_use() {
  local hex
  hex=$(printf '%04X' "$1")
  awk -v p=":$hex" 'NR > 1 && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
ephemeral_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
pick_port() {
  local p span=$(( ephemeral_low - 20000 ))
  [ "$span" -gt 1000 ] || span=12000
  for _ in $(seq 50); do
    p=$(( 20000 + RANDOM % span ))
    if ! in_use "$p" && [ "$p" != "${1:-}" ]; then echo "$p"; return 0; fi
  done
  return 1
}
ctld_port=$(pick_port) || fail "no free port for slurmctld"
slurmd_port=$(pick_port "$ctld_port") || fail "no free port for slurmd"

install -d -m 0755 "$D/state" "$D/spool"
cat >"$D/slurm.conf" <<CONF
# One-node cluster for asgd's tests (tests/cluster/slurm_up.sh).
ClusterName=asgd
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
KillWait=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc)
PartitionName=debug Nodes=localhost Default=YES State=UP OverSubscribe=YES MaxTime=INFINITE
CONF

export SLURM_CONF="$D/slurm.conf"
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" -N localhost || fail "slurmd did not start"

# Up means the node is schedulable.
state=""
for _ in $(seq 200); do
  state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)
  case "$state" in idle*|mixed*|allocated*) break ;; esac
  sleep 0.1
done
case "$state" in
  idle*|mixed*|allocated*) ;;
  *) fail "the node did not become idle within 20 s (state: '${state:-no answer}')" ;;
esac

printf 'export SLURM_CONF=%q\nexport ASGD_SLURM_DIR=%q\n' "$SLURM_CONF" "$D" >"$D/env"
say "up under $D in $(( ($(date +%s%N) - t0) / 1000000 )) ms (slurmctld :$ctld_port, slurmd :$slurmd_port)"
cat "$D/env"
