"""The test files below this folder are data for scriptbuilder's tests: never collect them."""

collect_ignore_glob = ["*"]
