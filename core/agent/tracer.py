"""Run by the agent with a role's own python (``PYTHON -c SOURCE ADDRESS LOGDIR MS LEVEL``): ask the
TensorFlow server at ADDRESS for a trace of MS milliseconds, which that server writes into LOGDIR
(``plugins/profile/<session>/<host>_<port>.xplane.pb``). Prints ``{"ok": false, "imported": true}``
once TensorFlow is imported, then one JSON line, ``{"ok": true}`` or ``{"ok": false, "error": ...}``
(the last line is the outcome); TensorFlow prints the real cause of a failure on stderr only.
Kept to the standard library and TensorFlow, and to syntax any python 3 that runs TensorFlow reads.
"""

from __future__ import annotations

import importlib
import json
import sys


def main(argv: list[str]) -> int:
    address, logdir, duration_ms, level = argv[0], argv[1], int(argv[2]), int(argv[3])
    try:
        # By name, when it runs: this file runs only in the role's python, never in TowerDeck's,
        # and core/ holds no import of TensorFlow (tests/test_imports.py).
        tf = importlib.import_module("tensorflow")
    except Exception as exc:  # no TensorFlow, or a broken one, for this python
        print(json.dumps({"ok": False, "no_tf": True, "error": f"no TensorFlow for {sys.executable}: {exc}"}))
        return 3
    # Importing TensorFlow can take longer than the trace: this line tells a trace killed at the
    # agent's limit after the import from one killed before it.
    print(json.dumps({"ok": False, "imported": True}), flush=True)
    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=level, python_tracer_level=0, device_tracer_level=1
    )
    try:
        # One attempt: the agent's hard time limit covers the whole call.
        tf.profiler.experimental.client.trace(
            "grpc://" + address, logdir, duration_ms, num_tracing_attempts=1, options=options
        )
    except Exception as exc:  # one generic error; the cause is on stderr
        print(json.dumps({"ok": False, "error": str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)}))
        return 1
    print(json.dumps({"ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
