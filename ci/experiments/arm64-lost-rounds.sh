#!/bin/sh
# The arm64 lost-rounds experiment (docs/kernels.md, "Open: arm64 6.1 under TCG"),
# run inside the arm64 guest as vng --exec: rounds of three sysdiet runs beside a
# strace of a busy victim; each run's programs' run_cnt (bpf_stats) is read from
# /proc/PID/fdinfo while its victim sleeps, then its counted calls. Needs the
# victim ./sp (tests/victims/sigprocmask.c, cross-built) in /sysdiet-run.
exec > /sysdiet-run/exp-$(date +%s).log 2>&1
echo 1 > /proc/sys/kernel/bpf_stats_enabled
S=/work/kmat/target/aarch64-unknown-linux-gnu/release/sysdiet
cd /sysdiet-run
mkdir -p out; rm -f out/*
for round in $(seq ${ROUNDS:-20}); do
  strace -f -c -o /dev/null ./sp 20000 >/dev/null 2>&1 &
  spid=$!
  sleep 0.3
  pids=""
  for k in 1 2 3; do
    $S run --backend bpf --json -o out/r$round.$k.json -- sh -c './sp 300 >/dev/null; sleep 4' &
    pids="$pids $!"
  done
  sleep 3
  k=0
  for p in $pids; do
    k=$((k+1))
    for f in /proc/$p/fdinfo/*; do
      awk -v tag="r$round.$k" '/^prog_id/{id=$2} /^run_cnt/{rc=$2} /^verified_insns/{vi=$2} END{print tag, "prog", id, "run_cnt", rc, "verified", vi}' $f 2>/dev/null
    done
  done
  wait $pids
  kill $spid 2>/dev/null; wait $spid 2>/dev/null
  for k in 1 2 3; do
    python3 -c "
import json,sys
d=json.load(open('out/r$round.$k.json'))
def walk(o):
    if isinstance(o,dict):
        if o.get('name')=='rt_sigprocmask' and 'calls' in o: yield o['calls']
        for v in o.values(): yield from walk(v)
    elif isinstance(o,list):
        for v in o: yield from walk(v)
print('r$round.$k', 'rt_sigprocmask calls', max(list(walk(d)) or [0]), 'all', sum(s['calls'] for s in d['syscalls']))
"
  done
done
echo done
