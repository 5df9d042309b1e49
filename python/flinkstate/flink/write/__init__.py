"""Writing canonical Flink savepoints (`_metadata`, keyed and operator state files) for a target release.

May import `flink.files` and below.
"""
