"""Helpers shared by the safety tests and their worker processes (no pytest imports here).

:class:`HashEmbedder` is a tiny deterministic bag-of-words embedder (dim 384): identical
texts get identical vectors and texts sharing words are close, which is all the crash and
concurrency tests need, without loading the real model in every child process.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from synapse_integrations.bench.serve import free_port

DIM = 384
_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Deterministic hashed bag of words (plus a whole-text bucket), unit rows of dim 384."""

    dim = DIM

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float64)
        for tok in _WORD.findall(text.lower()) + [text]:
            h = hashlib.blake2b(tok.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            i = int.from_bytes(h[:4], "little") % DIM
            v[i] += 1.0 if h[4] & 1 else -1.0
        n = np.linalg.norm(v)
        return v / n if n else np.eye(DIM)[0]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, DIM))

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


class ForkServer:
    """Drives tests/_crash_worker.py: forks writer processes and kills them (SIGKILL)."""

    def __init__(self) -> None:
        worker = Path(__file__).with_name("_crash_worker.py")
        self.proc = subprocess.Popen([sys.executable, str(worker)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def _ask(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"the crash worker server died (exit {self.proc.wait()})")
        return reply.strip()

    def run(self, path: Path, log: Path, first: int, fsync_delay: float) -> int:
        """Fork a writer (see tests/_crash_worker.py); returns its pid."""
        return int(self._ask(f"run {path} {log} {first} {fsync_delay}").split()[1])

    def forget(self, path: Path, log: Path, speaker: str, fsync_delay: float) -> int:
        """Fork a process that forgets everything ``speaker`` said; returns its pid."""
        return int(self._ask(f"forget {path} {log} {speaker} {fsync_delay}").split()[1])

    def agent(self, path: Path, log: Path, first: int, seed: int) -> int:
        """Fork an agent-like process (a turn, then a retrieval, on the default snapshot
        schedule) that runs until killed; returns its pid."""
        return int(self._ask(f"agent {path} {log} {first} {seed}").split()[1])

    def kill(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        status = int(self._ask(f"reap {pid}").split()[2])
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, \
            f"the writer ended on its own (status {status}) instead of being killed"

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


class ChromaServer:
    """A real ``chroma run`` process that a test can stop, freeze and restart on the same
    port and data folder (the session fixture's server is shared and must stay up)."""

    def __init__(self, data: Path, port: int | None = None) -> None:
        self.data = Path(data)
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> ChromaServer:
        import chromadb

        self.data.mkdir(parents=True, exist_ok=True)
        log = open(self.data / "server.log", "ab")
        exe = Path(sys.executable).with_name("chroma")  # not a shell shim (pyenv: seconds slower)
        exe = str(exe) if exe.is_file() else (shutil.which("chroma") or "chroma")
        self.proc = subprocess.Popen(
            [exe, "run", "--path", str(self.data / "db"), "--host", self.host, "--port", str(self.port)],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma run exited early: {self.log_tail()}")
            try:
                chromadb.HttpClient(host=self.host, port=self.port).heartbeat()
                return self
            except Exception:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"chroma server did not start within {timeout} s: {self.log_tail()}")

    def stop(self) -> None:
        """Stop the server (by its pid) and wait until it has exited."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGCONT)  # in case it was frozen
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def freeze(self) -> None:
        """SIGSTOP: the server keeps its port but answers nothing (a hung server)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def log_tail(self) -> str:
        try:
            return (self.data / "server.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""


