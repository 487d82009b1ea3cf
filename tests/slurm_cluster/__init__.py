"""A real one-node Slurm (slurmctld + slurmd + munged on loopback) for the test suite.

``cluster.SlurmCluster`` brings it up and tears it down; ``fixtures.slurm_cluster`` is the
session-scoped pytest fixture; ``tools/`` holds stand-ins for the GPU tools that jobs run.
"""

from tests.slurm_cluster.cluster import (
    JobResult,
    JobTimeout,
    SbatchError,
    SlurmCluster,
    SlurmUnavailable,
    tools_dir,
)

__all__ = [
    "JobResult",
    "JobTimeout",
    "SbatchError",
    "SlurmCluster",
    "SlurmUnavailable",
    "tools_dir",
]
