"""Flink's serializers and values: serializer snapshots, value bytes to Arrow and back, vector decoders.

May import flinkstate's `core` and `flink.errors`/`flink._io`; never metadata, file formats or the bridge.
"""
