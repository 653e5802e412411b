"""What `strace -c -o FILE` counted: {syscall: calls}. Shared by
ci/kernel-tests' checks, which hold sysdiet's counts against it."""


def calls(path):
    counted = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            counted[f[-1]] = int(f[3])
    return counted


def agrees(doc, name, theirs):
    """Whether sysdiet's JSON `doc` counted `name` as strace did (`theirs`),
    or short of it by no more than the hook runs the kernel skipped, which
    the report shows (`lost.hook_runs_missed`: where a syscall's hook can be
    preempted, 7.x) -- the rule of the tests' exact_but_missed. With what it
    counted and what it missed, for the message."""
    ours = next((s["calls"] for s in doc["syscalls"] if s["name"] == name), 0)
    missed = doc.get("lost", {}).get("hook_runs_missed", 0)
    return ours <= theirs and theirs - ours <= missed, ours, missed
