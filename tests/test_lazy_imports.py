"""No copy of job_spec.json's data when there is no secret to mask."""

from __future__ import annotations


def test_job_spec_data_is_not_copied_without_secrets() -> None:
    from scriptbuilder.resolution.secrets import mask_data

    data = {"slurm_env": {"partitions": [{"name": "gpu"}]}, "token": "s3cret"}
    assert mask_data(data, ()) is data
    assert mask_data(data, ("s3cret",)) == {
        "slurm_env": {"partitions": [{"name": "gpu"}]},
        "token": "***",
    }
