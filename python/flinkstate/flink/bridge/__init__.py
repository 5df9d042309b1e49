"""Flink state in flinkstate's terms: a savepoint as a pinned checkpoint and a source, import, export of a root.

The top of `flink`: may import every `flink` package and flinkstate's `core`, `format`, `read` and `store`.
"""
