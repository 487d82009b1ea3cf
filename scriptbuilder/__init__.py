"""scriptbuilder: TensorRT-LLM test requests to Slurm batch scripts and job_spec.json."""

__version__ = "0.1.0"
