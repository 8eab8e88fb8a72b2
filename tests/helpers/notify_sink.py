"""A user's notification command, for tests: appends the JSON object it reads on stdin to a file.

``notify_sink.py OUT`` appends one line to OUT. ``--hang`` first writes its pid to OUT.pid and
sleeps (a command that never returns); ``--fail`` prints a reason on stderr and exits 3.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    out = sys.argv[1]
    if "--hang" in sys.argv:
        with open(out + ".pid", "w") as f:
            f.write(str(os.getpid()))
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
