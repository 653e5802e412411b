#!/usr/bin/env python3
"""The attach loop of docs/kernels.md ("2026-12-02, afternoon"): N rounds of
`sysdiet attach` to `gated 3 500` (tests/victims/gated.c), by default and
with SYSDIET_KEEP=0, each round's per-thread newfstatat counts against the
500 each worker makes, and its lost.hook_runs_missed. Run inside a guest as
vng --exec (ci/kernels --kernel NAME fetches the kernel), or on a host:

    ci/experiments/attach-loop.py OUT N [SYSDIET [GATED]]

OUT gets loop.log (a line a round: OK, SHORT within what was missed, or
WRONG: over 500, a thread missing, or short by more than was missed) and
the JSON of every round that was not OK."""
import json
import os
import subprocess
import sys
import time

out, rounds = sys.argv[1], int(sys.argv[2])
repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sysdiet = sys.argv[3] if len(sys.argv) > 3 else f"{repo}/target/release/sysdiet"
gated = sys.argv[4] if len(sys.argv) > 4 else f"{out}/gated"
if not os.path.exists(gated):
    subprocess.run(["cc", "-O2", f"-I{repo}/tests/victims", "-o", gated, f"{repo}/tests/victims/gated.c", "-lpthread"], check=True)
log = open(f"{out}/loop.log", "a")
for i in range(rounds):
    for name, extra in [("default", {}), ("keep0", {"SYSDIET_KEEP": "0"})]:
        target = subprocess.Popen([gated, "3", "500"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        while len(os.listdir(f"/proc/{target.pid}/task")) != 4:
            time.sleep(0.001)
        doc_path = f"{out}/{name}-{i}.json"
        attach = subprocess.Popen([sysdiet, "attach", "-p", str(target.pid), "--json", "-o", doc_path, "--duration", "1h"],
                                  stderr=subprocess.PIPE, env=dict(os.environ, **extra), text=True)
        said = ""
        while "sysdiet: attached to" not in said:
            line = attach.stderr.readline()
            if not line:
                break
            said += line
        target.stdin.close()
        said += attach.stderr.read()
        attach.wait()
        target.wait()
        try:
            doc = json.load(open(doc_path))
        except (OSError, ValueError) as e:
            log.write(f"{name} {i} WRONG no document: {e}: {said}\n")
            continue
        threads = doc["processes"][0]["threads"]
        counts = sorted(next((s["calls"] for s in t["syscalls"] if s["name"] == "newfstatat"), 0) for t in threads)[-3:]
        missed = doc["lost"]["hook_runs_missed"]
        short = sum(500 - n for n in counts)
        if len(threads) == 4 and all(n <= 500 for n in counts) and short <= missed:
            verdict = "OK" if short == 0 else "SHORT"
        else:
            verdict = "WRONG"
        log.write(f"{name} {i} {verdict} threads={len(threads)} counts={counts} missed={missed}\n")
        log.flush()
        if verdict == "OK":
            os.remove(doc_path)
