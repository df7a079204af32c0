"""The `csdkit` console script of an installed wheel.

The command itself is the C++ program (host/cli) that the wheel carries as csdkit/bin/csdkit;
this runs it in place of the Python process, with the same arguments, so exit statuses,
signals and output are the program's own.
"""

import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "csdkit")
    if not os.access(exe, os.X_OK):
        sys.stderr.write(
            "csdkit: expected the command at %s, found none: this package was built without "
            "it (CLI11 was not found at build time; install CLI11, e.g. Debian's libcli11-dev, "
            "and reinstall)\n" % exe)
        return 2
    os.execv(exe, [sys.argv[0]] + sys.argv[1:])
    return 2  # not reached: execv replaces this process or raises OSError


if __name__ == "__main__":
    sys.exit(main())
