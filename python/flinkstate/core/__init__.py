"""The core: errors, key types, key groups, TTL, state descriptors, compaction policy and file IO.

Everything else builds on these; they import nothing of flinkstate's outside `core`.
"""
