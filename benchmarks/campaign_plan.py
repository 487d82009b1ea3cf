"""A campaign's plan against one job per test, on a simulated partition.

``python benchmarks/campaign_plan.py`` writes a checkout of generated test files into a
temporary folder (``--tests`` tests, each needing 1, 2, 4 or 8 GPUs by its
``skip_less_device`` mark, with recorded durations in ``.test_durations`` and every
25th marked ``ISOLATION``), plans the campaign of their list as ``scriptbuilder build``
does (each GPU count derived from the source), and prints the planned makespan and
GPU-hours against the lower bound (the larger of the tests' GPU-minutes over the
partition's GPUs and the longest test) and against one job per test, both scheduled by
the same simulation (jobs started in order as GPUs free up, a later job first when it
fits).  Every job pays the start-up (image, container, install step).  Nothing is
submitted.  The seed fixes the list, so the figures repeat.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from functools import cache
from pathlib import Path

from scriptbuilder.campaign.entries import read_list
from scriptbuilder.campaign.plan import MARGIN, STARTUP_MINUTES, plan_campaign, simulate
from scriptbuilder.inputs.tests.testdb import read_stages

#: Share of the tests needing 1, 2, 4 and 8 GPUs.
MIX = {1: 0.5, 2: 0.2, 4: 0.2, 8: 0.1}
PER_FILE = 10


def generate(root: Path, tests: int, seed: int) -> Path:
    """A checkout of ``tests`` generated tests and their list; returns the list file."""
    rng = random.Random(seed)
    defs = root / "tests/integration/defs"
    (defs / "campaign").mkdir(parents=True)
    durations: dict[str, float] = {}
    lines = []
    for first in range(0, tests, PER_FILE):
        name = f"campaign/test_gen_{first // PER_FILE:03d}.py"
        body = ["import pytest", ""]
        for n in range(first, min(first + PER_FILE, tests)):
            gpus = rng.choices(list(MIX), weights=list(MIX.values()))[0]
            mark = f"@pytest.mark.skip_less_device({gpus})\n" if gpus > 1 else ""
            body.append(f"{mark}def test_t{n:03d}():\n    pass\n")
            test_id = f"{name}::test_t{n:03d}"
            durations[test_id] = round(min(3600.0, 60 * rng.lognormvariate(1.6, 0.8)), 1)
            lines.append(test_id + (" ISOLATION" if n % 25 == 24 else ""))
        (defs / name).write_text("\n".join(body))
    (defs / ".test_durations").write_text(json.dumps(durations, indent=1))
    listing = root / "tests.txt"
    listing.write_text("\n".join(lines) + "\n")
    return listing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--time-limit", type=float, default=120.0, help="minutes")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    nodes, gpn = args.nodes, args.gpus_per_node
    with tempfile.TemporaryDirectory() as tmp:
        entries = read_list(str(generate(Path(tmp), args.tests, args.seed)))
        plan = plan_campaign(
            entries,
            repo_root=tmp,
            read_stages=cache(read_stages),
            default_minutes=10.0,
            nodes=nodes,
            gpus_per_node=gpn,
            where="the simulated partition",
            usable=args.time_limit * MARGIN,
        )
    needs = [need for job in plan.jobs for need in job.needs]
    single = sorted(
        ((STARTUP_MINUTES + n.minutes, n.gpus) for n in needs), key=lambda j: -j[0] * j[1]
    )
    s, bound = plan.schedule, plan.schedule.lower_bound
    work = sum(n.minutes * n.gpus for n in needs) / 60
    single_span = simulate(single, nodes, gpn)
    single_hours = sum(m * g for m, g in single) / 60
    by_gpus = {g: sum(n.gpus == g for n in needs) for g in sorted(MIX)}
    print(
        f"{len(needs)} tests (by GPUs {by_gpus}), {nodes} nodes x {gpn} GPUs, start-up "
        f"{STARTUP_MINUTES} min per job, time limit {args.time_limit:.0f} min "
        f"({args.time_limit * MARGIN:.0f} usable), seed {args.seed}"
    )
    print(f"{'':18}{'jobs':>6}{'makespan min':>14}{'x bound':>9}{'GPU-hours':>11}{'x tests':>9}")
    rows = [
        ("lower bound", "-", bound, work),
        ("planned campaign", str(len(plan.jobs)), s.makespan, s.gpu_hours),
        ("one job per test", str(len(needs)), single_span, single_hours),
    ]
    for name, jobs, span, hours in rows:
        print(
            f"{name:18}{jobs:>6}{span:>14.1f}{span / bound:>9.2f}{hours:>11.2f}{hours / work:>9.2f}"
        )


if __name__ == "__main__":
    main()
