"""Kryo: Flink 1.x's Kryo 2.24 and Flink 2.x's Kryo 5.6 values read and written (wire format, Flink's registrations, class
schemas), the Java types they hold as columns, and their migration to the serializers Flink 2.x picks.

May import flinkstate's `core`, `flink.errors`/`flink._io` and the rest of `flink.serde`; nothing outside `serde` knows
Kryo's classes or formats.
"""
