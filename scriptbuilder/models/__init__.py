"""The pydantic models, the one declaration and validator of the request
(:mod:`.request`), slurm_env.json (:mod:`.slurm_env`), job_spec.json (:mod:`.job_spec`)
and a build's result (:mod:`.build_result`); :mod:`.schemas` gives ``scriptbuilder
schema NAME`` their JSON Schemas. Each is imported from its own module.
"""
