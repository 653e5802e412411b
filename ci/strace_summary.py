"""What `strace -c -o FILE` counted: {syscall: calls}. Shared by
ci/kernel-tests' checks, which hold sysdiet's counts against it."""


def calls(path):
    counted = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            counted[f[-1]] = int(f[3])
    return counted
