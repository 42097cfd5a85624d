"""Writes garbage to every pipe it can write to (the private result pipe included)."""

import fcntl
import os
import stat

for name in os.listdir("/proc/self/fd"):
    fd = int(name)
    if fd <= 2:
        continue
    try:
        writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
        if writable and stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b"\x00garbage, not json\xff")
    except OSError:
        pass


def f(x):
    return x
