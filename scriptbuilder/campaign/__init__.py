"""A campaign: a list of tests (``test_list`` or ``test_db``) packed into few jobs.

:mod:`.entries` reads the list (TensorRT-LLM's line grammar, or the test-db blocks a
selection matches), :mod:`.plan` derives each entry's GPUs and minutes and packs the
entries into jobs, :mod:`.build` builds each job as an ordinary work_dir below the
campaign folder and writes ``campaign.json``.
"""
