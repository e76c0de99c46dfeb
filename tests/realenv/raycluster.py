"""A real multi-node Ray cluster on one host: a head and worker nodes started by `ray start`, each
its own raylet with its own environment (a worker node started with another PYTHONPATH is another
machine as far as its Python goes). For the fleet --ray tests and benchmarks/bench_ray_fleet.py.

Every process of the cluster carries a marker variable of its own (the raylets hand their environment
down to their workers and those to the checks), and stop() ends exactly those processes, by id. Not
`ray stop`: it ends every Ray process of the machine's user, other people's clusters included.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Optional

MARKER = "ATTN_DOCTOR_TEST_RAY_CLUSTER"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    def __init__(self, venv: Path, root: Path, base_env: Optional[dict] = None):
        self.ray = str(venv / "bin" / "ray")
        self.python = str(venv / "bin" / "python")
        self.root = root
        # Ray's session folders hold AF_UNIX sockets, whose paths may not exceed 107 bytes: a short
        # folder of their own, whatever the depth of pytest's (an xdist worker's is deeper)
        self.temp = Path(tempfile.mkdtemp(prefix="ray-"))
        self.id = uuid.uuid4().hex
        self.env = dict(base_env if base_env is not None else os.environ)
        for name in [n for n in self.env if n.startswith("RAY_")]:
            del self.env[name]
        self.env.update({MARKER: self.id, "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: dict[str, subprocess.Popen] = {}

    def _start(self, name: str, args: list, env_extra: Optional[dict]) -> None:
        temp = self.temp / name
        temp.mkdir(parents=True, exist_ok=True)
        env = dict(self.env, **(env_extra or {}))
        log = open(self.root / f"{name}.log", "wb")
        argv = [self.ray, "start", "--block", "--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--temp-dir", str(temp),
                "--dashboard-agent-listen-port", str(free_port()), "--metrics-export-port", str(free_port()),
                "--runtime-env-agent-port", str(free_port()), *args]
        self.nodes[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()

    def start_head(self, num_cpus: int = 1, env: Optional[dict] = None, timeout: float = 60.0) -> None:
        """The head, once its GCS takes connections (worker nodes started before retry for minutes)."""
        self._start("head", ["--head", "--port", str(self.port), "--num-cpus", str(num_cpus), "--include-dashboard", "false",
                             "--dashboard-port", str(free_port())], env)
        deadline = time.monotonic() + timeout
        while True:
            self._alive("head")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Ray head's GCS did not listen on {self.address} within {timeout:g} s") from None
                time.sleep(0.2)

    def _alive(self, name: str) -> None:
        proc = self.nodes[name]
        if proc.poll() is not None:
            raise RuntimeError(f"ray start ({name}) exited {proc.returncode}: {(self.root / f'{name}.log').read_text()[-2000:]}")

    def add_node(self, name: str, num_cpus: int = 1, num_gpus: int = 0, env: Optional[dict] = None, timeout: float = 120.0) -> None:
        """A worker node, once it is up: one at a time, as raylets starting together on two busy
        cores time out (Ray gives a node 30 s to register)."""
        self._start(name, ["--address", self.address, "--num-cpus", str(num_cpus), "--num-gpus", str(num_gpus),
                           "--resources", '{"node_%s": 1}' % name], env)
        deadline = time.monotonic() + timeout
        log = self.root / f"{name}.log"
        while b"will now block" not in log.read_bytes():
            self._alive(name)
            if time.monotonic() > deadline:
                raise RuntimeError(f"Ray node {name} did not start within {timeout:g} s: {log.read_text()[-2000:]}")
            time.sleep(0.2)

    def node_ids(self, count: int, timeout: float = 90.0) -> dict[str, str]:
        """{name: node id} once `count` nodes are alive (each node is told apart by its custom resource)."""
        script = (
            "import json, logging, sys, time, ray\n"
            f"ray.init(address={self.address!r}, logging_level=logging.ERROR, log_to_driver=False)\n"
            f"deadline = time.monotonic() + {timeout}\n"
            "while True:\n"
            "    alive = [n for n in ray.nodes() if n['Alive']]\n"
            f"    if len(alive) >= {count} or time.monotonic() > deadline: break\n"
            "    time.sleep(0.3)\n"
            "out = {}\n"
            "for n in alive:\n"
            "    names = [k[5:] for k in n['Resources'] if k.startswith('node_')]\n"
            "    out[names[0] if names else 'head'] = n['NodeID']\n"
            "print('NODES', json.dumps(out))\n"
        )
        for name in self.nodes:
            self._alive(name)
        proc = subprocess.run([self.python, "-c", script], capture_output=True, text=True, timeout=timeout + 60, env=self.env)
        if proc.returncode != 0:
            raise RuntimeError(f"the cluster at {self.address} did not come up: {proc.stderr[-2000:]}")
        import json

        ids = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("NODES "))[6:])
        if len(ids) < count:
            raise RuntimeError(f"{len(ids)} of {count} Ray nodes alive after {timeout:g} s: {ids}")
        return ids

    def kill_node(self, name: str) -> None:
        """SIGKILL a node's `ray start` and everything it started (its raylet): a machine gone."""
        proc = self.nodes[name]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)

    def stop(self) -> None:
        for proc in self.nodes.values():
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3  # then what is left is killed
        for proc in self.nodes.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        # What is left (the workers and checks, in sessions of their own): this cluster's own, by id.
        for _ in range(3):
            left = self.processes()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        shutil.rmtree(self.temp, ignore_errors=True)

    def processes(self) -> list[int]:
        """The processes that carry this cluster's marker."""
        wanted = f"{MARKER}={self.id}".encode()
        out = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if wanted in (entry / "environ").read_bytes().split(b"\0"):
                    out.append(int(entry.name))
            except OSError:
                continue
        return out
