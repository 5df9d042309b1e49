"""The storage format: data file schemas and IO (v1), checks, newest-wins merge, checkpoint metadata, Delta manifest and log.

This layer knows files and tables only: it may import `core`, never `read`, `store`, the backend, `flink` or the connector.
"""

from flinkstate.format.constants import FORMAT_VERSION, SUPPORTED_FORMAT_VERSIONS
from flinkstate.format.datafile import FileEntry

__all__ = ["FORMAT_VERSION", "SUPPORTED_FORMAT_VERSIONS", "FileEntry"]
