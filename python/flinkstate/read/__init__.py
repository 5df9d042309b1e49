"""Reading checkpoints: the pinned checkpoint, the one scan path, TTL visibility, metadata tables, changes.

May import `core` and `format`; never the store, the backend, the Flink bridge or Spark.
"""
