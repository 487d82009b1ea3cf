"""The version of scriptbuilder (written into every generated script and job_spec.json)."""

__version__ = "0.1.0"
