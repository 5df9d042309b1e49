"""A Flink `_metadata` file: its handles, operators named by uid or id, and which release wrote it.

May import `flink.serde` and below.
"""
