"""The checkpoint store: a root's log and manifest, the writer, garbage collection, maintenance, verify, rewrite.

May import `core`, `format` and `read`. Inside, `root` (a root's read side) is below `registry` and
`writer`, `maintenance` is above `writer`, and `store` (the public `CheckpointStore`) is on top.
"""
