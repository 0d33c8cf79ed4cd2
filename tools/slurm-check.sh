#!/bin/sh
# srun launches of tensorhost, checked on a one-node Slurm: the same fit as
# one process from 2 and 3 tasks (PMIx and PMI-2), one clear error for
# tasks given no process-management interface, scancel (a scheduler's
# stop: SIGTERM to every task) ending with the model written and exit 143,
# and a task killed ending the step with nothing written.
#
# Usage: tools/slurm-check.sh [BUILD]   (default build; BUILD/bin/tensorhost)
# Needs a Slurm whose srun reaches this host. With SETUP=1 (as root, on a
# machine with no Slurm of its own: Debian 12's slurmd, slurmctld,
# slurm-client and munge installed) it first writes /etc/slurm/slurm.conf
# for this host alone and starts munged, slurmctld and slurmd.
set -eu
build=${1:-build}
tensorhost=$(cd "$build/bin" && pwd)/tensorhost
source_dir=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() { # check CONDITION-EXIT-STATUS WHAT
    if [ "$1" -eq 0 ]; then echo "ok: $2"; else echo "FAIL: $2"; failures=$((failures + 1)); fi
}
holds() { # holds COMMAND...: its exit status, without ending the script
    if "$@"; then return 0; else return 1; fi
}

if [ "${SETUP:-0}" = 1 ]; then
    host=$(hostname)
    cores=$(nproc)
    memory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024))
    mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge /var/spool/slurmd \
        /var/spool/slurmctld /var/log/slurm
    [ -f /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
    chmod 400 /etc/munge/munge.key
    pgrep -x munged > /dev/null || su -s /bin/sh munge -c /usr/sbin/munged
    cat > /etc/slurm/slurm.conf <<EOF
ClusterName=local
SlurmctldHost=$host
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$cores Sockets=1 CoresPerSocket=$cores ThreadsPerCore=1 RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
    pgrep -x slurmctld > /dev/null || slurmctld
    pgrep -x slurmd > /dev/null || slurmd
    sleep 3
fi
srun --version

cd "$work"
"$tensorhost" convert "$source_dir/data/uber-2014-sample.tns.gz" uber.tnsb > /dev/null
cat > run.toml <<'EOF'
[tensor]
path = "uber.tnsb"
[cpd]
rank = 4
max_iters = 25
tolerance = 0.0
seed = 11
[backend]
plugin = "cpu-reference"
[output]
dir = "out-one"
EOF
fit() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['cpd']['final_fit'])" "$1/report.json"; }
count() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['processes']['count'])" "$1/report.json"; }
same() { python3 -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) < 1e-10 else 1)" "$1" "$2"; }

"$tensorhost" --config run.toml > one.log 2>&1
one=$(fit out-one)
echo "one process: fit $one"
for pmi in pmix pmi2; do
    for tasks in 2 3; do
        out=out-$pmi-$tasks
        status=0
        srun -n "$tasks" --overcommit --mpi="$pmi" "$tensorhost" --config run.toml \
            --set output.dir="$out" > "$out.log" 2>&1 || status=$?
        if [ "$status" -eq 0 ] && [ "$(count "$out")" = "$tasks" ] && same "$(fit "$out")" "$one"; then
            check 0 "srun -n $tasks --mpi=$pmi: fit $(fit "$out"), $tasks processes"
        else
            check 1 "srun -n $tasks --mpi=$pmi: exit $status; $(tail -n 3 "$out.log")"
        fi
    done
done

status=0
srun -n 2 --mpi=none "$tensorhost" --config run.toml --set output.dir=out-none > none.log 2>&1 ||
    status=$?
errors=$(grep -c '^tensorhost: error:' none.log || true)
refused() { [ "$status" -ne 0 ] && [ "$errors" = 1 ] && grep -q 'srun --mpi=pmix' none.log && [ ! -e out-none ]; }
check "$(holds refused; echo $?)" "srun --mpi=none: exit $status, $errors error line(s): $(grep '^tensorhost: error:' none.log | head -n 1)"

# A long run, stopped by scancel once both tasks are into their iterations.
long() { # long OUT: srun in the background, its exit status in OUT.status
    (status=0
     srun -n 2 --mpi=pmix --job-name="$1" "$tensorhost" --config run.toml \
         --set cpd.max_iters=10000000 --set output.dir="$1" > "$1.log" 2>&1 || status=$?
     echo "$status" > "$1.status") &
    sleep 5
}
wait_status() { # wait_status OUT: up to 90 s
    for _ in $(seq 90); do [ -f "$1.status" ] && break; sleep 1; done
    cat "$1.status" 2>/dev/null || echo none
}
long out-stopped
scancel --name=out-stopped
status=$(wait_status out-stopped)
stopped() { [ "$status" = 143 ] && grep -q '"status" *: *"interrupted"' out-stopped/report.json; }
check "$(holds stopped; echo $?)" "scancel: exit $status, outputs $(ls out-stopped 2>/dev/null | tr '\n' ' ')"

long out-killed
pkill -KILL -n -f "^$tensorhost .*output.dir=out-killed" || true
status=$(wait_status out-killed)
ended() { [ "$status" != 0 ] && [ "$status" != none ] && [ ! -e out-killed ]; }
check "$(holds ended; echo $?)" "a task killed: exit $status, outputs $(ls out-killed 2>/dev/null | tr '\n' ' ')"

if [ "$failures" -ne 0 ]; then
    echo "$failures checks failed"
    exit 1
fi
echo "all srun checks passed"
