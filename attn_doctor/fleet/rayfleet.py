"""`attn-doctor fleet --ray`: one `check` per alive node of a running Ray cluster (per GPU with
--per-gpu), gathered into the fleet report of `check --distributed`.

Each check is a Ray task pinned to its node (NodeAffinitySchedulingStrategy, soft=False: never run
elsewhere) that asks for no CPU and no GPU, so that it is scheduled beside a training job that holds
every slot. It runs `python -m attn_doctor check --json` with the task's own interpreter, the Python
the cluster's workers (or the runtime_env named) run in: where verl's or OpenRLHF's workers run.
What comes back is untrusted (a node's environment is what is being diagnosed): bounded and
validated as `fleet DIR` validates report files. Ray is imported here only (installed beside attn-doctor).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..boundary.inputs import FLEET_MAX_FILES, REPORT_MAX_BYTES, InputError, check_structure, shown
from .aggregate import FleetReport, Member, Problem, aggregate
from .digest import report_digest
from .files import member_of, report_from_json

INSTALL_HINT = "fleet --ray needs Ray in the environment attn-doctor runs in: pip install ray"
CONNECT_TIMEOUT_S = 60.0
# The check inside the task stops this long before the fleet's deadline, so that it can still say so.
TASK_MARGIN_S = 5.0
# A task with no CPU and no GPU: Ray then leaves CUDA_VISIBLE_DEVICES as the node has it (older Ray
# set it empty for a task without GPUs unless told not to), so the check sees the node's GPUs.
TASK_ENV = {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}


class RayUsageError(Exception):
    """Ray is not installed, or a --runtime-env that cannot be used: exit 2."""


class RayConnectError(Exception):
    """No cluster to reach at the address, or no alive node: exit 3."""


@dataclass(frozen=True)
class Target:
    node: str  # the Ray node id (hex)
    address: str  # the node's IP as Ray knows it
    gpu: Optional[int] = None  # --per-gpu: the position among the node's GPUs

    @property
    def label(self) -> str:
        where = f"node {self.node[:12]} ({self.address})"
        return where if self.gpu is None else f"{where} GPU {self.gpu}"


def load_runtime_env(value: Optional[str]) -> Optional[dict]:
    """--runtime-env: a JSON or YAML file, or the mapping itself as JSON / YAML text."""
    if value is None:
        return None
    from ..probes.configs import ConfigReadError, _parse_yaml, load_document

    text = value.strip()
    try:
        if Path(value).exists() or value.lower().endswith((".json", ".yaml", ".yml")):
            doc = load_document(Path(value))
        else:  # the mapping itself (JSON is YAML)
            doc = _parse_yaml(text)
            check_structure(doc)
    except (ConfigReadError, InputError) as exc:
        raise RayUsageError(f"--runtime-env {shown(value, 80)}: {exc}") from None
    except OSError as exc:
        raise RayUsageError(f"--runtime-env {shown(value, 80)}: {exc.strerror or exc}") from None
    if not isinstance(doc, dict):
        raise RayUsageError(f"--runtime-env {shown(value, 80)}: a runtime_env is a mapping (pip, conda, env_vars, working_dir, ...), not {type(doc).__name__}")
    env_vars = doc.get("env_vars", {})
    if not isinstance(env_vars, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
        raise RayUsageError(f"--runtime-env {shown(value, 80)}: env_vars must map names to strings")
    return doc


def task_runtime_env(user: Optional[dict]) -> dict:
    """The user's runtime_env (or none: the cluster's default), with TASK_ENV added to its env_vars."""
    env = dict(user or {})
    env["env_vars"] = {**TASK_ENV, **(env.get("env_vars") or {})}
    return env


def _import_ray():
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError:
        raise RayUsageError(INSTALL_HINT) from None
    return ray, NodeAffinitySchedulingStrategy


def connect(ray, address: Optional[str], timeout: float) -> None:
    """ray.init, within a deadline: an address where nothing answers makes Ray retry for minutes."""
    outcome: dict[str, Any] = {}

    def _init() -> None:
        import logging

        try:
            ray.init(address=address or "auto", logging_level=logging.ERROR, log_to_driver=False, namespace="attn-doctor",
                     configure_logging=True)
            outcome["ok"] = True
        except BaseException as exc:  # noqa: BLE001 - reported in one line
            outcome["error"] = exc

    thread = threading.Thread(target=_init, name="attn-doctor-ray-connect", daemon=True)
    thread.start()
    thread.join(timeout)
    where = address or os.environ.get("RAY_ADDRESS") or "auto (this machine's running cluster)"
    if "ok" in outcome:
        return
    if "error" in outcome:
        raise RayConnectError(f"cannot connect to the Ray cluster at {where}: {_one_line(outcome['error'])}")
    raise RayConnectError(f"no answer from the Ray cluster at {where} within {timeout:g} s")


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def targets(nodes: list, per_gpu: bool) -> list[Target]:
    """One target per alive node (per GPU with per_gpu; a node without GPUs still gets one)."""
    out = []
    for n in sorted(nodes, key=lambda n: (str(n.get("NodeManagerAddress", "")), str(n.get("NodeID", "")))):
        if not n.get("Alive"):
            continue
        node, address = str(n.get("NodeID", "")), str(n.get("NodeManagerAddress", "?"))
        gpus = int((n.get("Resources") or {}).get("GPU", 0) or 0)
        if per_gpu and gpus > 0:
            out.extend(Target(node, address, i) for i in range(gpus))
        else:
            out.append(Target(node, address))
    if len(out) > FLEET_MAX_FILES:
        raise RayConnectError(f"more than {FLEET_MAX_FILES:,} checks to run")
    return out


def _not_installed(result: dict) -> bool:
    return "No module named attn_doctor" in str(result.get("stderr", "")) and not result.get("stdout")


def judge(target: Target, result: Any) -> tuple[Optional[dict], Optional[str]]:
    """A task's result -> (the report, None) or (None, why there is none), in one line."""
    if not isinstance(result, dict):
        return None, f"{target.label}: its task returned {type(result).__name__}, not a check's output"
    python = shown(_flat(result.get("python", "?")), 120)
    if result.get("error"):
        return None, f"{target.label}: {_flat(result['error'])[:300]} ({python})"
    if _not_installed(result):
        return None, (f"{target.label}: attn-doctor is not installed in the node's Python ({python}): install it there, "
                      "or name a runtime_env that has it (--runtime-env '{\"pip\": [\"attn-doctor\"]}')")
    stdout = result.get("stdout")
    if not isinstance(stdout, bytes) or not stdout.strip():
        tail = _flat(" | ".join(str(result.get("stderr", "")).strip().splitlines()[-2:]))[:300]
        return None, f"{target.label}: its check printed no report (exit {result.get('returncode')!r}, {python}): {tail or 'nothing on stderr'}"
    try:
        doc = report_from_json(stdout if len(stdout) <= REPORT_MAX_BYTES else stdout[: REPORT_MAX_BYTES + 1])
    except ValueError as exc:
        return None, f"{target.label}: its check's output is not a usable report: {exc}"
    return doc, None


def _flat(value: Any) -> str:
    """Text from a node on one line (its newlines and tabs made spaces)."""
    return " ".join(str(value).split())


def run_fleet(
    *,
    address: Optional[str],
    check_args: list[str],
    runtime_env: Optional[dict],
    per_gpu: bool,
    timeout: float,
    fail_on: str,
    progress: Optional[Callable[[str], None]] = None,
) -> FleetReport:
    """Connect, run the checks, gather them within `timeout` seconds of starting them, aggregate."""
    ray, NodeAffinitySchedulingStrategy = _import_ray()
    say = progress or (lambda _message: None)
    say("connecting to the Ray cluster")
    with _stdout_to_stderr():
        connect(ray, address, min(CONNECT_TIMEOUT_S, timeout))
        try:
            return _run(ray, NodeAffinitySchedulingStrategy, check_args, runtime_env, per_gpu, timeout, fail_on, say)
        finally:
            try:
                ray.shutdown()
            except Exception:  # noqa: BLE001 - disconnecting is best effort: the report is made
                pass


@contextlib.contextmanager
def _stdout_to_stderr():
    """Ray's driver prints the cluster's news ("(raylet) The node with node id ... died") on stdout,
    from Python and from C++: while Ray runs, file descriptor 1 is stderr, so that stdout holds the
    report alone (--json is read by programs)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _run(ray, NodeAffinitySchedulingStrategy, check_args, runtime_env, per_gpu, timeout, fail_on, say) -> FleetReport:
    from ray import cloudpickle

    from . import ray_task

    cloudpickle.register_pickle_by_value(ray_task)  # the task runs where attn-doctor is not installed too
    planned = targets(ray.nodes(), per_gpu)
    if not planned:
        raise RayConnectError("the Ray cluster has no alive node")
    env = task_runtime_env(runtime_env)
    remote = ray.remote(ray_task.node_check)
    started = time.monotonic()
    deadline = started + timeout
    check_timeout = max(1.0, timeout - TASK_MARGIN_S)
    refs = {}
    for t in planned:
        refs[remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=t.node, soft=False),
            num_cpus=0, num_gpus=0, max_retries=0, runtime_env=env, name=f"attn-doctor check {t.label}",
        ).remote(list(check_args), check_timeout, REPORT_MAX_BYTES, t.gpu)] = t

    pending = list(refs)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        say(f"{len(refs) - len(pending)} of {len(refs)} checks in")
        _done, pending = ray.wait(pending, num_returns=len(pending), timeout=min(left, 1.0))

    members: list[Member] = []
    reports: dict[str, dict] = {}
    problems: list[Problem] = []
    late = set(pending)
    gone = _dead_nodes(ray)
    for ref, t in refs.items():
        if ref in late:
            why = "left the cluster during the check (its raylet died)" if t.node in gone else "did not answer"
            problems.append(Problem(kind="missing", node=t.node, message=f"{t.label}: {why} within {timeout:g} s"))
            continue
        try:
            result = ray.get(ref, timeout=5.0)
        except Exception as exc:  # noqa: BLE001 - the task failed: its node is named with Ray's reason
            why = "left the cluster during the check" if t.node in gone else f"its task failed: {type(exc).__name__}: {_task_error(exc)}"
            problems.append(Problem(kind="missing", node=t.node, message=f"{t.label}: {why}"))
            continue
        doc, why = judge(t, result)
        if doc is None:
            problems.append(Problem(kind="missing", node=t.node, host=_str(result, "hostname"), message=why or "?"))
            continue
        digest = report_digest(doc)
        reports.setdefault(digest, doc)
        member = member_of(doc, digest)
        member.rank, member.local_rank, member.node = None, t.gpu, t.node
        member.host = member.host or _str(result, "hostname") or t.address
        members.append(member)
    for ref in late:
        try:
            ray.cancel(ref, force=True)
        except Exception:  # noqa: BLE001 - its node may be gone: nothing left to stop
            pass
    return aggregate(members, reports, problems, expected=len(planned), command="fleet", launcher="ray", fail_on=fail_on)


def _dead_nodes(ray) -> set:
    try:
        return {str(n.get("NodeID")) for n in ray.nodes() if not n.get("Alive")}
    except Exception:  # noqa: BLE001 - the cluster's state is not readable: nothing is known dead
        return set()


def _task_error(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    return _one_line(cause if isinstance(cause, BaseException) else exc)


def _str(result: Any, key: str) -> Optional[str]:
    value = result.get(key) if isinstance(result, dict) else None
    return value[:255] if isinstance(value, str) else None
