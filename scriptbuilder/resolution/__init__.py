"""Resolution: procedure steps 1 to 3, from a request to the values a script needs."""
