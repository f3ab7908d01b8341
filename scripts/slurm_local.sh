#!/usr/bin/env bash
# A single-node Slurm on this machine, for the test that submits `memaudit plan --emit slurm`'s
# scripts (tests/study/test_slurm.py). Run as root.
#
#   scripts/slurm_local.sh install   apt-get install slurm-wlm and munge when sbatch is missing
#   scripts/slurm_local.sh start     write a one-node slurm.conf (only where none is, or ours is),
#                                    start munged, slurmctld and slurmd unless running, wait until
#                                    the node takes jobs
#   scripts/slurm_local.sh stop      stop the daemons this script started, by the PIDs they wrote
#
# Idempotent: start on a running Slurm only checks that it takes jobs. Processes are tracked by
# their PID files only (never a kill by name). The node: this host as `slurmd -C` describes it,
# with ProctrackType=proctrack/linuxproc and TaskPlugin=task/none (no cgroups needed), slurmctld
# and slurmd as root, no accounting.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# memaudit: single-node test Slurm (scripts/slurm_local.sh)"
RUN=/run/memaudit-slurm
MUNGE_PID=/run/munge/munged.pid

install() {
  if ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq slurm-wlm munge >/dev/null
  fi
}

write_conf() {
  if [ -e "$CONF" ] && ! head -1 "$CONF" | grep -qF "$MARK"; then
    echo "slurm_local: $CONF exists and is not ours: using it as it is" >&2
    return
  fi
  local node host
  node=$(slurmd -C | head -1)
  host=$(hostname -s)
  mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm "$RUN"
  cat >"$CONF" <<EOF
$MARK
ClusterName=memaudit
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
$node State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

alive() {  # alive PIDFILE: the process the file names is running
  [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

start() {
  install
  write_conf
  mkdir -p "$RUN" /run/munge
  chown munge:munge /run/munge
  if ! alive "$MUNGE_PID"; then
    runuser -u munge -- munged
  fi
  alive "$RUN/slurmctld.pid" || slurmctld
  alive "$RUN/slurmd.pid" || slurmd
  for _ in $(seq 1 120); do
    state=$(sinfo -h -o %T 2>/dev/null | head -1 || true)
    case "$state" in
      idle|mixed|allocated) echo "slurm_local: the node is $state" >&2; return 0 ;;
      down*|drain*) scontrol update nodename="$(hostname -s)" state=resume 2>/dev/null || true ;;
    esac
    sleep 1
  done
  echo "slurm_local: the node did not come up (state: ${state:-none}); see /var/log/slurm/" >&2
  return 1
}

stop() {
  for name in slurmd slurmctld; do
    if alive "$RUN/$name.pid"; then kill "$(cat "$RUN/$name.pid")"; fi
  done
  if alive "$MUNGE_PID"; then kill "$(cat "$MUNGE_PID")"; fi
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
