"""The agent as shipped: one zipapp built in memory from this package, byte for byte the same
every time (fixed timestamps and modes, sorted names, bytecode without timestamps), so that what runs on a remote host, what
runs here and what the tests run are one artifact.

    data = artifact()                 # bytes of agent.pyz (built once per process)
    path = artifact_file()            # the same bytes in a per-user cache (content-addressed)
    path = artifact_file(run_dir)     # ... or as RUN_DIR/agent.pyz
    python3 -u agent.pyz [--serve SOCK | --attach SOCK | --probe REQUEST] ...
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import io
import marshal
import os
import tempfile
import zipfile
from pathlib import Path

ARTIFACT_NAME = "agent.pyz"
PROBE_MEMBER = "core/agent/probe.py"
GPUS_MEMBER = "core/agent/gpuquery.py"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold: the build does not depend on mtimes
_PACKAGE = Path(__file__).resolve().parent
# The zipapp's entry point. sys.path[0] is made absolute because serve mode changes directory.
_ROOT_MAIN = (
    "import os, sys\nsys.path[0] = os.path.abspath(sys.path[0])\nfrom core.agent.main import main\nsys.exit(main())\n"
)


def _bytecode(name: str, source: bytes) -> bytes:
    """``name``'s compiled form as an unchecked hash-based .pyc (PEP 552): no timestamp, so the
    build stays deterministic. zipimport uses it when the running python has the same magic
    number, and compiles the .py beside it otherwise."""
    code = compile(source, name, "exec", dont_inherit=True)
    flags = (0b01).to_bytes(4, "little")  # hash-based, not checked against the source
    # Marshal format 2, without the back-references of format 3: those are written for objects with
    # more than one reference at dump time, which depends on what else the process has loaded (an
    # interned name a test process shares, a fresh launcher does not), so the bytes were not the same
    # in two processes. marshal.loads reads every format.
    return importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(source) + marshal.dumps(code, 2)


def _members() -> list[tuple[str, bytes]]:
    files = [("__main__.py", _ROOT_MAIN.encode()), ("core/__init__.py", b"")]
    for path in sorted(_PACKAGE.glob("*.py")):
        source = path.read_bytes()
        files.append((f"core/agent/{path.name}", source))
        if path.name != "__main__.py":  # compiled: a start without compiling ~2,000 lines
            files.append((f"core/agent/{path.stem}.pyc", _bytecode(f"core/agent/{path.name}", source)))
    return sorted(files)


@functools.cache
def artifact() -> bytes:
    """The agent zipapp's bytes (a ``#!/usr/bin/env python3`` line, then the zip)."""
    buf = io.BytesIO()
    buf.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in _members():
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buf.getvalue()


def artifact_digest() -> str:
    """A short content hash of :func:`artifact` (names the cache file)."""
    return hashlib.sha256(artifact()).hexdigest()[:16]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "towerdeck"


def artifact_file(directory: Path | None = None) -> Path:
    """The artifact on disk: ``directory/agent.pyz``, by default in a per-user cache directory
    named by its hash (``~/.cache/towerdeck/HASH/agent.pyz``).

    Written atomically (a temporary file, then a rename) and only when missing or different, so
    concurrent launches and a running agent never see a half-written file.
    """
    data = artifact()
    # Always named agent.pyz, so that an agent is known by its command line (see serve.py).
    directory = directory if directory is not None else _cache_dir() / artifact_digest()
    target = directory / ARTIFACT_NAME
    try:
        if target.read_bytes() == data:
            return target
    except OSError:
        pass
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".agent-", suffix=".pyz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def probe_source() -> bytes:
    """The pre-flight probe's source as held in the artifact (run as is over SSH)."""
    with zipfile.ZipFile(io.BytesIO(artifact())) as zf:
        return zf.read(PROBE_MEMBER)
