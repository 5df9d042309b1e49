"""Flink's keyed and operator state file formats: canonical, heap (HashMap native), RocksDB/ForSt SSTs.

May import `flink.pyflink`, `flink.meta`, `flink.serde` and below.
"""
