"""Shared fixtures: snapshot storage under tests/snapshots and the real Slurm cluster."""
