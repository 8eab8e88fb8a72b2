"""Counts what a soak role writes: ``soak_counter.py COUNT_DIR CMD...``.

Runs CMD with its output piped through here, passes every byte on to this process's stdout (the
run directory's log, through TowerDeck) and, at the end, writes how many newlines it passed on to
COUNT_DIR/<role>-<pid>.count. The soak kills CMD (the real trainer), not this wrapper, so the
count is exact; this wrapper then dies by the same signal, so TowerDeck sees a SIGKILLed role.
A SIGTERM from a stop reaches CMD too (same process group); the wrapper waits for its last output.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def main() -> int:
    count_dir, command = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # After the start: an ignored signal would be inherited by the trainer. The trainer gets the
    # stop's SIGTERM (same process group); this wrapper waits for its last output.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    assert child.stdout is not None
    newlines = 0
    while True:
        data = os.read(child.stdout.fileno(), 1 << 16)
        if not data:
            break
        view = memoryview(data)
        while view:
            view = view[os.write(1, view) :]
        newlines += data.count(b"\n")
    code = child.wait()
    role = os.environ.get("TOWERDECK_ROLE", "role").replace(":", "-")
    with open(os.path.join(count_dir, f"{role}-{os.getpid()}.count"), "w") as f:
        f.write(f"{newlines}\n")
    if code < 0:  # die the way the trainer died, so that TowerDeck sees the signal
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught anyway
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main())
