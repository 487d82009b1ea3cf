"""Defaults the request model shares with the drop-in, which builds without the models."""

from __future__ import annotations

#: Names (shell wildcards, any letter case) whose custom_env values are secret, by default.
DEFAULT_SECRET_PATTERNS = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*KEY*")
