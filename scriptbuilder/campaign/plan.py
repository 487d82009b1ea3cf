"""The plan of a campaign: each entry's GPUs (derived as for one test) and minutes, the
entries grouped by need and packed into jobs, and the schedule those jobs would get.

An entry's minutes come from pytest-split's ``.test_durations`` (seconds per node id, in
the folder the test runs from; a file, class or folder id sums the ids below it), else
its ``TIMEOUT`` marker, else the request's ``default_test_minutes``.  Entries that need
the same GPUs (and run from the same folder) share jobs; an ``ISOLATION`` entry gets a
job of its own.  A job's estimate is :data:`STARTUP_MINUTES` plus its entries' minutes,
and it must fit :data:`MARGIN` of the time limit.  Within that, the job length is chosen
from a few candidates around the lower bound (the larger of the GPU-minutes over the
partition's GPUs and the longest entry): the fewest jobs whose makespan (as :func:`simulate`
gives it) is within :data:`TOLERANCE` (plus one start-up) of the shortest.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scriptbuilder.campaign.entries import Entry
from scriptbuilder.errors import BuildError
from scriptbuilder.inputs.tests import inspect_tests
from scriptbuilder.inputs.tests.testdb import StageReader

#: Share of the time limit a job's estimate may fill.
MARGIN = 0.8
#: Minutes a job spends before its first test (image, container, install step).
STARTUP_MINUTES = 2.0
#: A plan with fewer jobs (less start-up) is taken while its estimated makespan is within
#: this factor (plus one start-up) of the shortest one tried.
TOLERANCE = 1.15
#: Job lengths tried, as multiples of the lower bound.
_TRIED = (0.25, 1 / 3, 0.5, 1.0, 2.0, 4.0)
DURATIONS = ".test_durations"


@dataclass(frozen=True)
class Need:
    """What one entry needs and how long it runs, with where each came from."""

    entry: Entry
    gpus: int
    exact: bool
    #: The folder (relative to the checkout) pytest runs from; None: the checkout.
    workdir: str | None
    gpus_source: str
    minutes: float
    minutes_source: str


@dataclass(frozen=True)
class Job:
    needs: tuple[Need, ...]

    @property
    def gpus(self) -> int:
        return self.needs[0].gpus

    @property
    def minutes(self) -> float:
        """The estimate: start-up and every entry's minutes."""
        return STARTUP_MINUTES + sum(need.minutes for need in self.needs)

    @property
    def test_cmd(self) -> str:
        """One pytest invocation over the plain entries, one per entry with ``-k``/``-m``;
        with several, each runs and the command ends with the first failure's status."""
        plain = [need.entry.selector for need in self.needs if not need.entry.filtered]
        runs = [f"pytest -v {' '.join(plain)}"] if plain else []
        runs += [f"pytest -v {n.entry.selector}" for n in self.needs if n.entry.filtered]
        if len(runs) == 1:
            return runs[0]
        lines = ["unset -v sb_rc", *(f"{run} || sb_rc=${{sb_rc:-$?}}" for run in runs)]
        return "\n".join([*lines, '(exit "${sb_rc:-0}")'])


@dataclass(frozen=True)
class Schedule:
    """The jobs' estimated run on the partition (minutes, GPU-hours)."""

    makespan: float
    gpu_hours: float
    lower_bound: float


@dataclass
class Plan:
    jobs: list[Job]
    skipped: list[Entry] = field(default_factory=list)
    #: Entries whose test was not found (left out with allow_missing_tests), and why.
    missing: list[tuple[Entry, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    nodes: int = 1
    gpus_per_node: int = 1
    usable_minutes: float | None = None
    schedule: Schedule = Schedule(0.0, 0.0, 0.0)


Durations = dict[str, dict[str, float]]


def _durations(repo_root: str, workdir: str | None, read: Durations) -> dict[str, float]:
    """``.test_durations`` of the folder tests run from (empty when there is none)."""
    path = os.path.join(repo_root, workdir or "", DURATIONS)
    if path not in read:
        try:
            with open(path, encoding="utf-8") as file:
                data = json.load(file)
        except FileNotFoundError:
            data = {}
        except (OSError, ValueError) as exc:
            raise BuildError(f"{path} is not a JSON object of seconds ({exc}); fix it") from None
        if not isinstance(data, dict) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in data.values()
        ):
            raise BuildError(f"{path} must map test ids to seconds; fix it")
        read[path] = {str(k): float(v) for k, v in data.items()}
    return read[path]


def _recorded_seconds(durations: dict[str, float], test_id: str) -> float | None:
    """The recorded seconds of ``test_id``, or the sum over the ids below it."""
    if test_id in durations:
        return durations[test_id]
    name = posixpath.normpath(test_id)
    below = [s for k, s in durations.items() if k.startswith(name) and k[len(name)] in ":[/"]
    return sum(below) if below else None


def derive(
    entry: Entry,
    repo_root: str,
    read_stages: StageReader,
    default_minutes: float,
    read: Durations,
) -> Need | str:
    """The entry's need, or why its test was not found (or cannot be sized)."""
    found = inspect_tests(f"pytest -v {entry.selector}", repo_root, None, read_stages)
    unknown = [w for w in found.warnings if " not found in " in w]
    if found.missing or unknown:
        return (found.missing or unknown)[0]
    if found.unresolved:  # a selection the source does not show: its GPUs are not known
        return f"{found.unresolved[0]}, so the GPUs it needs are not known"
    need = found.requirement
    gpus, exact = (need.devices, need.exact) if need is not None else (1, False)
    source = need.source if need is not None else "default (nothing in the source says)"
    seconds = _recorded_seconds(_durations(repo_root, found.workdir, read), entry.test_id)
    if seconds is not None:
        minutes, why = seconds / 60, DURATIONS
    elif entry.timeout_minutes is not None:
        minutes, why = float(entry.timeout_minutes), "TIMEOUT marker"
    else:
        minutes, why = default_minutes, "default_test_minutes"
    return Need(entry, gpus, exact, found.workdir, source, minutes, why)


def simulate(jobs: Iterable[tuple[float, int]], nodes: int, gpus_per_node: int) -> float:
    """The makespan of ``(minutes, gpus)`` jobs started in order as GPUs free up on
    ``nodes`` nodes of ``gpus_per_node`` (a later job starts first when it fits: backfill)."""
    waiting = list(jobs)
    free = [gpus_per_node] * nodes
    running: list[tuple[float, int, int]] = []  # (end, node, gpus)
    now = 0.0
    while waiting:
        for job in list(waiting):
            node = next((n for n in range(nodes) if free[n] >= job[1]), None)
            if node is not None:
                free[node] -= job[1]
                running.append((now + job[0], node, job[1]))
                waiting.remove(job)
        if not running:
            raise ValueError(f"a job of {waiting[0][1]} GPUs fits no node of {gpus_per_node}")
        running.sort()
        now, node, gpus = running.pop(0)
        free[node] += gpus
    return max([now, *(end for end, _, _ in running)])


def _pack(needs: Sequence[Need], target: float) -> list[list[Need]]:
    """``needs`` (one group) in as few bins as keep each at most ``target`` minutes of
    tests, longest first into the emptiest bin."""
    ordered = sorted(needs, key=lambda n: -n.minutes)
    total = sum(n.minutes for n in needs)
    count = max(1, math.ceil(total / target)) if target > 0 else len(needs)
    while True:
        bins: list[list[Need]] = [[] for _ in range(count)]
        loads = [0.0] * count
        for need in ordered:
            i = loads.index(min(loads))
            bins[i].append(need)
            loads[i] += need.minutes
        if max(loads) <= target or count >= len(needs):
            return [b for b in bins if b]
        count += 1


def _jobs(groups: Sequence[Sequence[Need]], isolated: Sequence[Need], target: float) -> list[Job]:
    bins = [(order, b) for order in groups for b in _pack(order, target)]
    packed = [Job(tuple(sorted(b, key=order.index))) for order, b in bins]
    jobs = packed + [Job((need,)) for need in isolated]
    return sorted(jobs, key=lambda job: (-job.minutes * job.gpus, -job.gpus))


def schedule(jobs: Sequence[Job], nodes: int, gpus_per_node: int) -> Schedule:
    work = sum((job.minutes - STARTUP_MINUTES) * job.gpus for job in jobs)
    longest = max((n.minutes for job in jobs for n in job.needs), default=0.0)
    bound = max(work / (nodes * gpus_per_node), longest)
    span = simulate(((job.minutes, job.gpus) for job in jobs), nodes, gpus_per_node)
    return Schedule(span, sum(job.minutes * job.gpus for job in jobs) / 60, bound)


def pack(
    needs: Sequence[Need],
    nodes: int,
    gpus_per_node: int,
    usable: float | None,
    max_jobs: int | None = None,
) -> tuple[list[Job], Schedule]:
    """The jobs of ``needs`` with the shortest estimated makespan (then the fewest jobs)
    whose estimates fit ``usable`` minutes and whose count is at most ``max_jobs``."""
    groups: dict[tuple[int, bool, str | None], list[Need]] = {}
    isolated = [need for need in needs if need.entry.isolation]
    for need in needs:
        if not need.entry.isolation:
            groups.setdefault((need.gpus, need.exact, need.workdir), []).append(need)
    work = sum(n.minutes * n.gpus for n in needs)
    longest = max((n.minutes for n in needs), default=0.0)
    bound = max(work / (nodes * gpus_per_node), longest, 1e-9)
    cap = math.inf if usable is None else usable - STARTUP_MINUTES
    one_each = max(sum(n.minutes for n in group) for group in groups.values()) if groups else 1
    targets = sorted({min(cap, max(longest, bound * f)) for f in (*_TRIED, one_each / bound)})
    tried: list[tuple[list[Job], Schedule]] = []
    for target in targets:
        jobs = _jobs(list(groups.values()), isolated, target)
        if max_jobs is None or len(jobs) <= max_jobs:
            tried.append((jobs, schedule(jobs, nodes, gpus_per_node)))
    best = None
    if tried:
        shortest = min(plan.makespan for _, plan in tried)
        near = [t for t in tried if t[1].makespan <= TOLERANCE * shortest + STARTUP_MINUTES]
        best = min(near, key=lambda t: (len(t[0]), t[1].makespan))
    if best is None:
        fewest = len(_jobs(list(groups.values()), isolated, cap))
        raise BuildError(
            f"max_jobs = {max_jobs}, but the tests need at least {fewest} jobs (by GPU count, "
            "ISOLATION and the time limit); raise max_jobs or time_limit"
        )
    return best


def plan_campaign(
    entries: Sequence[Entry],
    *,
    repo_root: str,
    read_stages: StageReader,
    default_minutes: float,
    nodes: int,
    gpus_per_node: int | None,
    where: str,
    usable: float | None,
    max_jobs: int | None = None,
    allow_missing: bool = False,
) -> Plan:
    """Derive every entry's need and pack them (see the module docstring); ``where``
    names the partition (or machine) for a need above one node."""
    plan = Plan([], nodes=nodes, usable_minutes=usable)
    needs: list[Need] = []
    read: dict[str, dict[str, float]] = {}
    for entry in entries:
        if entry.skip is not None:
            plan.skipped.append(entry)
            continue
        need = derive(entry, repo_root, read_stages, default_minutes, read)
        if isinstance(need, str):
            if not allow_missing:
                raise BuildError(
                    f"{entry.where}: {need}; fix the test id (or pass allow_missing_tests: true)"
                )
            plan.missing.append((entry, need))
            plan.warnings.append(f"{entry.where}: {need} (allow_missing_tests): left out")
            continue
        if gpus_per_node is not None and need.gpus > gpus_per_node:
            raise BuildError(
                f"{entry.where}: {entry.test_id} needs {need.gpus} GPUs ({need.gpus_source}), "
                f"more than the {gpus_per_node} GPUs per node of {where}, and pytest runs on "
                "one node; choose a partition with more GPUs per node or leave the test out"
            )
        if usable is not None and STARTUP_MINUTES + need.minutes > usable:
            raise BuildError(
                f"{entry.where}: {entry.test_id} takes about {need.minutes:.0f} minutes "
                f"({need.minutes_source}), more than a job can hold within {MARGIN:.0%} of "
                "the time limit; raise time_limit"
            )
        needs.append(need)
    if not needs:
        raise BuildError(f"{entries[0].where if entries else 'the list'}: no test left to run")
    plan.gpus_per_node = gpus_per_node or max(n.gpus for n in needs)
    plan.jobs, plan.schedule = pack(needs, nodes, plan.gpus_per_node, usable, max_jobs)
    return plan
