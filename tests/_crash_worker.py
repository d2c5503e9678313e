"""Crash-test worker for tests/safety/test_safety_crash.py: a fork server whose children write a
memory until the test kills them with SIGKILL.

Importing chromadb costs seconds; forking from a server that imported it once lets the
test kill and restart a writer dozens of times within its time budget. Each child is a
real, separate process with its own Chroma instance, its own file handles and its own
directory lock; the kill is a real ``SIGKILL`` (no cleanup, no atexit, no flush).

Server protocol (one line each way on stdin/stdout):

- ``run <memory dir> <log file> <first turn number> <fsync delay s>`` -> ``pid <child pid>``
- ``forget <memory dir> <log file> <speaker> <fsync delay s>`` -> ``pid <child pid>``
- ``agent <memory dir> <log file> <first turn number> <seed>`` -> ``pid <child pid>``
- ``reap <pid>`` -> ``reaped <pid> <raw wait status>``
- ``quit``

A child appends to ``<log file>`` (unbuffered, so nothing is lost when it dies):
``BEGIN chroma`` / ``END chroma`` around every Chroma upsert, ``BEGIN snap`` /
``END snap`` around every snapshot write, and ``ID <id> <n>`` right *after*
``add_turn`` returned for turn ``n``. It runs until it is killed. A ``forget`` child logs
``BEGIN <phase>`` / ``END <phase>`` around each phase of ``forget(speaker=...)`` (journal,
apply, finish, scrub), then ``DONE``, and waits to be killed. An ``agent`` child lives as
an agent does, with the engine's default snapshot schedule (every 20 windows): it adds a
turn, logs ``ID <id> <n>``, then retrieves (a query about one of its earlier turns), until
killed; unqueried turns go dormant after 3 windows (10 by default), so turns are archived
between two snapshots, as in a long-running chat, within a few dozen turns.
"""

from __future__ import annotations

import os
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import chromadb  # noqa: E402,F401  (imported once, before forking)

from _safety_helpers import HashEmbedder  # noqa: E402

from synapse_integrations import Synapse, SynapseConfig  # noqa: E402
from synapse_integrations.core.lifecycle import forgetting as forgetting_mod  # noqa: E402
from synapse_integrations.storage import journal as journal_mod  # noqa: E402
from synapse_integrations.storage import snapshots as snap_mod  # noqa: E402
from synapse_integrations.storage import vectors as chroma_mod  # noqa: E402

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
_SYLLABLES = ("ka", "lo", "mi", "ren", "su", "ta", "vo", "xi", "bel", "dor", "fa", "gu",
              "hin", "jo", "ny", "pe", "qua", "ri", "sol", "tem", "ul", "ve", "wyn", "zo")


def turn_text(n: int) -> str:
    """The text of turn ``n``: six made-up words drawn from ``n`` (turns share few words,
    so each is found by its own text); the test recomputes it to check what came back."""
    rng = random.Random(n)
    words = ["".join(rng.choice(_SYLLABLES) for _ in range(3)) for _ in range(6)]
    return f"Note {n}: " + " ".join(words) + "."


class _SlowFsyncOs:
    """Stands in for ``os`` inside the snapshot module: every fsync takes longer, so that
    a kill aimed at a snapshot write lands inside it."""

    def __init__(self, delay: float) -> None:
        self._delay = delay

    def fsync(self, fd: int) -> None:
        time.sleep(self._delay)
        os.fsync(fd)

    def __getattr__(self, name: str):
        return getattr(os, name)


def _child(path: str, log_path: str, first: int, fsync_delay: float) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def emit(line: str) -> None:
        os.write(log, (line + "\n").encode())

    upsert = chroma_mod.VectorCollection.upsert
    save = snap_mod.SnapshotStore.save

    def traced_upsert(self, *args, **kwargs):
        emit("BEGIN chroma")
        upsert(self, *args, **kwargs)
        emit("END chroma")

    def traced_save(self, *args, **kwargs):
        emit("BEGIN snap")
        version = save(self, *args, **kwargs)
        emit("END snap")
        return version

    chroma_mod.VectorCollection.upsert = traced_upsert
    snap_mod.SnapshotStore.save = traced_save
    if fsync_delay > 0:
        snap_mod.os = _SlowFsyncOs(fsync_delay)

    mem = Synapse(path, embedder=HashEmbedder(), snapshot_every=1)
    emit("OPEN")
    n = first
    while True:
        node_id = mem.add_turn(turn_text(n), speaker=("Sam", "Ana")[n % 2],
                               timestamp=T0 + timedelta(minutes=n), metadata={"n": n})
        emit(f"ID {node_id} {n}")
        if n % 7 == 0:
            mem.consolidate()
        n += 1


def _forget_child(path: str, log_path: str, speaker: str, fsync_delay: float) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def emit(line: str) -> None:
        os.write(log, (line + "\n").encode())

    def traced(owner, name: str, phase: str) -> None:
        real = getattr(owner, name)

        def run(*args, **kwargs):
            emit(f"BEGIN {phase}")
            out = real(*args, **kwargs)
            emit(f"END {phase}")
            return out

        setattr(owner, name, run)

    traced(journal_mod.ForgetJournal, "write", "journal")
    traced(forgetting_mod.Eraser, "remove", "apply")
    traced(forgetting_mod.Eraser, "finish", "finish")
    traced(chroma_mod.ChromaVectors, "scrub", "scrub")
    if fsync_delay > 0:
        snap_mod.os = _SlowFsyncOs(fsync_delay)
    mem = Synapse(path, embedder=HashEmbedder())
    emit("OPEN")
    mem.forget(speaker=speaker)
    emit("DONE")
    while True:
        time.sleep(1)


def _agent_child(path: str, log_path: str, first: int, seed: int) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    rng = random.Random(seed)
    mem = Synapse(path, embedder=HashEmbedder(),
                  config=SynapseConfig(dormancy_windows=3, dormancy_capacity=0))
    os.write(log, b"OPEN\n")
    n = first
    while True:
        node_id = mem.add_turn(turn_text(n), speaker=("Sam", "Ana")[n % 2],
                               timestamp=T0 + timedelta(minutes=n), metadata={"n": n})
        os.write(log, f"ID {node_id} {n}\n".encode())
        mem.retrieve(turn_text(rng.randint(first, n)), k=10)
        n += 1


def _fork(child: Any, log_path: str, *args: Any) -> None:
    """Run ``child(*args)`` in a forked process (it works until killed) and print its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            child(*args)
        except BaseException as exc:  # an error is a test failure: say it in the log
            with open(log_path, "a") as fh:
                fh.write(f"ERROR {type(exc).__name__}: {exc}\n")
        finally:
            os._exit(1)
    print(f"pid {pid}", flush=True)


def main() -> None:
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            return
        if cmd[0] == "run":
            _fork(_child, cmd[2], cmd[1], cmd[2], int(cmd[3]), float(cmd[4]))
        elif cmd[0] == "forget":
            _fork(_forget_child, cmd[2], cmd[1], cmd[2], cmd[3], float(cmd[4]))
        elif cmd[0] == "agent":
            _fork(_agent_child, cmd[2], cmd[1], cmd[2], int(cmd[3]), int(cmd[4]))
        elif cmd[0] == "reap":
            pid = int(cmd[1])
            _, status = os.waitpid(pid, 0)
            print(f"reaped {pid} {status}", flush=True)


if __name__ == "__main__":
    main()
