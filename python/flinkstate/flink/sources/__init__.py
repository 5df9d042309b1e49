"""FLIP-27 sources' positions in a savepoint: the split and enumerator formats of Flink's own connectors, a codec beside
`serde` (it uses serde's string codecs), decoded from and encoded to the exact bytes the connectors write.

`codec` (the SourceReaderState and SourceCoordinator framing, which source a state is), `kafka` (KafkaSource: split v0,
enumerator v0-v3), `files` (FileSource: split v1, pending-splits checkpoint v1), `sequence` (NumberSequenceSource and
DataGeneratorSource: split and enumerator v1), `edits` (rewind and skip, readers and enumerator together). The tables they
become, and the writes, are `flink.bridge.source_positions`.
"""

from flinkstate.flink.sources.codec import READER_STATE, decode_source, encode_source
from flinkstate.flink.sources.edits import (
    AddPartition,
    DropPartition,
    DropSplit,
    DropTopic,
    Edit,
    ForgetPath,
    MarkProcessed,
    RereadFile,
    SetOffset,
    SetSequence,
    apply_edits,
    parse_edit,
)
from flinkstate.flink.sources.model import (
    KINDS,
    EnumEntry,
    EnumeratorState,
    ReaderSplit,
    SourceKind,
    SourceState,
    SourceStateError,
    Split,
    SplitNotFoundError,
    UnknownSourceError,
)

__all__ = ["KINDS", "READER_STATE", "AddPartition", "DropPartition", "DropSplit", "DropTopic", "Edit", "EnumEntry", "EnumeratorState", "ForgetPath", "MarkProcessed",
           "ReaderSplit", "RereadFile", "SetOffset", "SetSequence", "SourceKind", "SourceState", "SourceStateError", "Split",
           "SplitNotFoundError", "UnknownSourceError", "apply_edits", "decode_source", "encode_source", "parse_edit"]
