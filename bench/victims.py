"""The test programs the benchmarks run (tests/victims/NAME.c), built into a
directory of the benchmark's own. Shared by the bench scripts."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(names, out):
    """Builds each victim of `names` into directory `out` (made if needed)
    unless its build there is newer than its source; returns their paths."""
    os.makedirs(out, exist_ok=True)
    paths = []
    for name in names:
        src = os.path.join(ROOT, "tests", "victims", name + ".c")
        exe = os.path.join(out, name)
        if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
            subprocess.run(["cc", "-O2", "-g", "-pthread", "-o", exe, src], check=True)
        paths.append(exe)
    return paths
