"""A misbehaving role for tests: ignores SIGTERM, listens on its task port, and forks two
children that outlive it: one in its process group, one that calls setsid() (a daemon)."""

import os
import signal
import socket
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen()
for detach in (False, True):
    if os.fork() == 0:
        if detach:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"child {os.getpid()} detached={detach}", flush=True)
        while True:  # the inherited listener keeps the port held
            time.sleep(0.5)
print(f"stubborn {os.getpid()} listening on {listener.getsockname()[1]}", flush=True)
exit_after = float(os.environ.get("STUBBORN_EXIT_AFTER", "0"))
start = time.time()
while not exit_after or time.time() - start < exit_after:
    time.sleep(0.1)
print("leaving my children behind", flush=True)
sys.exit(0)
