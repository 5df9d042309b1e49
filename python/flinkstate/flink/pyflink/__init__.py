"""PyFlink jobs' keyed state (`python-state-X`, coder bytes, Row keys) read back as the Python job's states.

May import `flink.meta`, `flink.serde` and below.
"""

from flinkstate.flink.pyflink.coders import *  # noqa: F403  (the public names users import from here)
from flinkstate.flink.pyflink.coders import __all__ as __all__
