"""The storage format: data file schemas and IO (v1), newest-wins merge, Delta manifest and log.

This layer knows files and tables only; it never imports the state backend or the connector.
"""

from flinkstate.format.constants import FORMAT_VERSION, SUPPORTED_FORMAT_VERSIONS
from flinkstate.format.datafile import FileEntry

__all__ = ["FORMAT_VERSION", "SUPPORTED_FORMAT_VERSIONS", "FileEntry"]
