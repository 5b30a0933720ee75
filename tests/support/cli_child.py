"""The archprobe CLI as a child process that reports its own peak RSS on exit.

Why not ru_maxrss from wait4: Linux keeps a forked child's pre-exec high-water mark (the size of the
test process that forked it), so a child of a large pytest looks large. /proc/self/status VmHWM is
the high-water mark of the memory map the CLI actually ran in.
"""

import atexit
import os
import sys


def _record() -> None:
    path = os.environ.get("ARCHPROBE_TEST_RSS_FILE")
    if not path:
        return
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                with open(path, "w") as out:
                    out.write(str(int(line.split()[1]) * 1024))


atexit.register(_record)
sys.argv = ["archprobe", *sys.argv[1:]]
from archprobe.cli.main import main  # noqa: E402

main()
