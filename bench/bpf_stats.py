"""The kernel's own accounting of BPF programs (kernel.bpf_stats_enabled):
each program's run time and runs, read while the command that loaded it
runs. Shared by bench/overhead and bench/workloads."""
import glob
import json
import subprocess
import time


def own_program_ids(pid):
    """The ids of the BPF programs process `pid` has attached (its links'
    fdinfo names them): its own, not another's of the same name."""
    ids = set()
    for fd in glob.glob(f"/proc/{pid}/fdinfo/*"):
        try:
            for line in open(fd):
                if line.startswith("prog_id:"):
                    ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def programs_shown(ids, names):
    """bpftool's view of the programs of `ids` named one of `names` (with
    their run time and runs while kernel.bpf_stats_enabled is on)."""
    if not ids:
        return []
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
    return [p for p in json.loads(out or "[]") if p["id"] in ids and p.get("name") in names]


def descendants(pid):
    """`pid` and the processes below it (one tool's command may be another
    tool, each with programs of its own)."""
    children = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
        except (OSError, IndexError, ValueError):
            pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def watch_costs(cmd, env, groups, names):
    """The command's exit status, and ns per run of each program named one
    of `names` that a group of its processes attached ({(group, name): ns}),
    read while it runs. `groups(pid)` gives each group's processes, the
    command's being `pid`."""
    seen = {}
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None:
        for group, pids in groups(p.pid).items():
            ids = set()
            for pid in pids:
                ids |= own_program_ids(pid)
            for prog in programs_shown(ids, names):
                if prog.get("run_cnt"):
                    seen[(group, prog["id"], prog["name"])] = prog["run_time_ns"] / prog["run_cnt"]
        time.sleep(0.05)
    return p.returncode, {(group, name): ns for (group, _, name), ns in seen.items()}


def program_costs(cmd, env, nested=False):
    """ns per run of each BPF program the command loads (`nested`: and the
    commands below it), from the kernel's own accounting
    (kernel.bpf_stats_enabled), read while it runs."""
    names = ("sys_exit", "sys_enter", "floor_exit", "floor_enter") + tuple(TWINS)
    _, seen = watch_costs(cmd, env, lambda pid: {"": descendants(pid) if nested else [pid]}, names)
    return {TWINS.get(name, name): ns for (_, name), ns in seen.items()}


# The other variants' hooks (docs/kernels.md), read as their current twins:
# the rows of a kernel before 5.17 are the same rows. By their whole names
# (bpftool reads them from the program's BTF) and by the kernel's own, cut
# to 15 characters.
TWINS = {
    twin: current
    for current, variants in (("sys_exit", ("sys_exit_legacy", "sys_exit_bounded")), ("sys_enter", ("sys_enter_legacy",)))
    for name in variants
    for twin in (name, name[:15])
}


def loads(prefix):
    """Whether a BPF row's command (`prefix`, run here with `true`) loads on
    this kernel: the state floor needs task storage (5.11)."""
    return subprocess.run(prefix + ["true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


class Enabled:
    """kernel.bpf_stats_enabled on for a `with` block (it adds two clock
    reads to every program run while on)."""

    def __enter__(self):
        subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
        return self

    def __exit__(self, *exc):
        subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=0"], check=False)
        return False
