"""Test helpers for serve.py: a real server on a free localhost port, and real HTTP requests.

Every request goes to 127.0.0.1 only; every loop is bounded in count and time.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from .helpers import ROOT, clean_env, pinned

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


@dataclass
class Server:
    """A `python serve.py` process (its own process group) and where it listens."""

    process: subprocess.Popen[str]
    port: int
    output: list[str] = field(default_factory=list)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def predict(self, payload: Any) -> tuple[int, Any]:
        """POST /predict with ``payload`` as JSON; the status and the decoded answer."""
        status, body = self.request(
            "POST", "/predict", json.dumps(payload).encode(), {"Content-Type": "application/json"}
        )
        return status, json.loads(body)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 60) -> tuple[int, str]:
        """Send ``signum`` to the server process alone; its exit status and everything it printed."""
        self.process.send_signal(signum)
        self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return self.process.returncode, "".join(self.output)

    _reader: threading.Thread = field(init=False, repr=False)


@contextmanager
def serving(*overrides: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    """`python serve.py <overrides> port=<free>` until /health says ok; stopped (and its
    process group ended, whatever happened) on leaving."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "serve.py"), *pinned([*overrides, f"port={port}"])],
        cwd=ROOT,
        env=env or clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    server = Server(process, port)
    server._reader = threading.Thread(
        target=lambda: server.output.extend(iter(process.stdout.readline, "")),  # type: ignore[union-attr]
        daemon=True,
    )
    server._reader.start()
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                server._reader.join(timeout=10)
                raise AssertionError(
                    f"serve.py exited {process.returncode}:\n{''.join(server.output)[-4000:]}"
                )
            try:
                if server.request("GET", "/health", timeout=5) == (200, b"ok"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"serve.py not ready in 180 s:\n{''.join(server.output)[-4000:]}"
                )
            time.sleep(0.25)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                process.wait(timeout=60)
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # anything of this server left behind


@dataclass
class Load:
    """What a bounded load of concurrent clients got."""

    latencies: list[float]  # seconds, one per answered request
    failures: list[str]
    seconds: float

    @property
    def requests_per_second(self) -> float:
        return len(self.latencies) / self.seconds

    def percentile(self, q: int) -> float:
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1]

    def summary(self) -> str:
        return (
            f"{len(self.latencies)} requests in {self.seconds:.2f} s: "
            f"{self.requests_per_second:.0f} requests/s, p50 {1000 * self.percentile(50):.1f} ms, "
            f"p99 {1000 * self.percentile(99):.1f} ms, {len(self.failures)} failed"
        )


def load(
    server: Server, payloads: Sequence[Any], clients: int, per_client: int, check: Any
) -> Load:
    """``clients`` threads, each sending ``per_client`` requests over one keep-alive
    connection (payloads in turn); ``check(payload, status, answer)`` says what is wrong with
    an answer, or None."""
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    bodies = [json.dumps(p).encode() for p in payloads]
    headers = {"Content-Type": "application/json"}

    def client(index: int) -> None:
        connection = http.client.HTTPConnection(HOST, server.port, timeout=60)
        try:
            for k in range(per_client):
                i = (index * per_client + k) % len(bodies)
                started = time.perf_counter()
                try:
                    connection.request("POST", "/predict", body=bodies[i], headers=headers)
                    response = connection.getresponse()
                    status, body = response.status, response.read()
                except (OSError, http.client.HTTPException) as error:
                    with lock:
                        failures.append(f"{type(error).__name__}: {error}")
                    connection.close()
                    connection = http.client.HTTPConnection(HOST, server.port, timeout=60)
                    continue
                elapsed = time.perf_counter() - started
                problem = check(payloads[i], status, json.loads(body))
                with lock:
                    latencies.append(elapsed)
                    if problem:
                        failures.append(problem)
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    return Load(latencies, failures, time.perf_counter() - started)


def group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
