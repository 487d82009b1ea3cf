"""The job's life after the build: submit, status, watch, cancel, verdict."""
