"""Resolution: procedure steps 1 to 3, from a request to the values a script needs
(each workflow's own part of Step 3 is its ``resolve``, in :mod:`scriptbuilder.workflows`)."""
