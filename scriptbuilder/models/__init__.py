"""The pydantic models, the one declaration and validator of the request
(:mod:`.request`), slurm_env.json (:mod:`.slurm_env`), job_spec.json (:mod:`.job_spec`)
and a build's result (:mod:`.build_result`), each imported from its own module
(``scriptbuilder schema NAME`` prints their JSON Schemas).
"""
