"""A user's notification command, for tests: appends the JSON object it reads on stdin to a file.

``notify_sink.py OUT`` appends one line to OUT. ``--hang`` first writes its pid to OUT.pid and
sleeps (a command that never returns); ``--fail`` prints a reason on stderr and exits 3.
``--daemon`` first forks a daemon that leaves the command's session (``setsid``, as a daemonising
helper does), writes its pid to OUT.daemon-<its pid> and sleeps an hour.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _daemon(out: str) -> None:
    if os.fork() == 0:
        os.setsid()
        daemon = os.fork()
        if daemon == 0:  # the daemon: in a session of its own, its parent gone
            with open(f"{out}.tmp-{os.getpid()}", "w") as f:
                f.write(str(os.getpid()))
            os.replace(f"{out}.tmp-{os.getpid()}", f"{out}.daemon-{os.getpid()}")
            time.sleep(3600)
        # Ready once its pid is on disk, as a daemonising helper waits for its pid file: else,
        # on a loaded machine, the command could end (and TowerDeck end the daemon with it)
        # before the daemon had written it, and a test could not find what it must see ended.
        deadline = time.monotonic() + 60
        while not os.path.exists(f"{out}.daemon-{daemon}") and time.monotonic() < deadline:
            time.sleep(0.01)
        os._exit(0)
    os.wait()


def main() -> int:
    out = sys.argv[1]
    if "--daemon" in sys.argv:
        _daemon(out)
    if "--hang" in sys.argv:
        # Whole or not at all: a test reads the pid as soon as the file is there.
        with open(out + ".pid.tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(out + ".pid.tmp", out + ".pid")
        time.sleep(3600)
    payload = json.loads(sys.stdin.read())
    if "--fail" in sys.argv:
        print("mail server said no", file=sys.stderr)
        return 3
    with open(out, "a") as f:
        f.write(json.dumps(payload) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
