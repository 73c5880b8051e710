"""One writer per result folder: a claim file that names the process computing a folder,
held under an exclusive ``flock`` while it computes (docs/cli.md, "One writer per folder").

``biasfree run`` claims ``OUT/.NAME.claim`` for each experiment (from before it decides to
reuse or compute until its result is saved), ``biasfree sweep`` and ``bf.sweep`` claim
``DIR/.sweep.claim`` for the whole sweep. A second process that wants the same folder
logs one line naming the holder (process id, host, command, since when) and waits until
the holder is done, then goes on as a rerun does: it finds the saved result and skips it.
So two runs into the same ``--out`` compute each result once.

The lock is the kernel's (``fcntl.flock`` on the open claim file), so it dies with its
process: a claim file left by a killed process is *stale* and is taken over at once (the
waiting line says so), whatever pid it names. The holder removes the file when done; a
waiter that locked a file the holder had just removed tries again on the new one (the
inode check in ``_lock``). Where the file system has no ``flock`` (some network
mounts), the claim is logged as not held and the work goes on unguarded.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, claims are not held
    fcntl = None

POLL_S = 0.2
"""Seconds between a waiter's tries of the lock."""


def claim_path(folder, name: str | None = None) -> Path:
    """The claim file of ``folder/name/`` (``folder/.name.claim``), or of the sweep folder
    ``folder`` itself (``folder/.sweep.claim``) when ``name`` is None."""
    folder = Path(folder)
    return folder / (f".{name}.claim" if name is not None else ".sweep.claim")


def holder(path) -> dict:
    """What the claim file at ``path`` says about its holder: ``pid``, ``host``, ``command``,
    ``since`` (``time.time()``); ``{}`` when it is missing or unreadable (being written)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def describe(doc: dict) -> str:
    """``"process 1234 on host h (biasfree run leaky-collapse, since 12:03:04)"``."""
    if not doc:
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(doc["since"])) if "since" in doc else "?"
    return (f"process {doc.get('pid', '?')} on host {doc.get('host', '?')} "
            f"({doc.get('command', '?')}, since {since})")


@contextmanager
def claim(folder, what: str, log: Callable[[str], None] = lambda _: None, name: str | None = None,
          poll_s: float = POLL_S) -> Iterator[Path]:
    """Hold the claim of ``folder/name/`` (of the folder itself when ``name`` is None) while
    the block runs: wait, with one ``log`` line naming the holder and ``what`` it is doing
    ("computing", "sweeping into"), while another process holds it; take over a stale one
    (its process gone) with one line saying so. Yields the claim file's path."""
    path = claim_path(folder, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    target = path.parent / name if name is not None else path.parent
    fd, waited = _lock(path, what, target, log, poll_s)
    try:
        yield path
    finally:
        if fd is not None:
            try:
                os.unlink(path)  # before the unlock: a waiter that then locks it sees it gone
            except FileNotFoundError:
                pass
            os.close(fd)  # releases the flock


def _lock(path: Path, what: str, target: Path, log, poll_s: float) -> tuple[int | None, bool]:
    """Lock the claim file at ``path`` (made if missing) and write this process into it;
    ``(fd, waited)``, fd None where no lock can be held."""
    if fcntl is None:  # pragma: no cover
        log(f"cannot lock {path} on this system: not guarding {target} against a second writer")
        return None, False
    waited = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                log(f"cannot lock {path} ({e.strerror}): not guarding {target} against a second writer")
                return None, False
            if not waited:
                log(f"{describe(holder(path))} is {what} {target}: waiting for it to finish "
                    "(Ctrl-C stops this one; the results it saves are kept)")
                waited = True
            time.sleep(poll_s)
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the holder removed the file between our open and our lock: try the new one
            os.close(fd)
            continue
        stale = holder(path)
        if stale and not waited and stale.get("pid") != os.getpid():
            log(f"taking over the stale claim of {target} by {describe(stale)}: that process is gone")
        doc = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
               "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(doc).encode(), 0)
        return fd, waited
