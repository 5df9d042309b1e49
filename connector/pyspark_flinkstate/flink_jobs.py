"""Flink savepoint import and export as Spark jobs: one Spark task per Flink subtask (key-group range).

    from pyspark_flinkstate.flink_jobs import import_savepoint, export_savepoint
    report = import_savepoint(spark, "/savepoints/savepoint-1a2b", "/state/job")   # one Delta commit
    export_savepoint(spark, "/state/job", "/savepoints/rewritten")                  # _metadata written last

The driver plans with the core (`flinkstate.flink.bridge.importer.plan_import`, `store_export.plan_export`: every
input check and type mapping before anything is written). Import: each task decodes one subtask handle and writes
that range's data files to the root, uncommitted; the driver registers every file and commits once. Export: each
task reads one key-group range of the checkpoint and writes that subtask's keyed file into the savepoint's temporary
folder; the driver writes `_metadata` and renames the folder into place. Memory per import task: one chunk of key
groups of its subtask (`import_task.CHUNK_BYTES` of file); per export task: its range's rows, encoded a chunk at a time.
The export's destination must be a folder every executor sees (a local path with `local[N]`, a shared mount otherwise).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from flinkstate.core.ttl import StateTtlConfig
from flinkstate.flink.bridge.export_task import (
    ExportRunner,
    RangeExport,
    export_range,
)
from flinkstate.flink.bridge.import_task import (
    ImportRunner,
    SubtaskImport,
    SubtaskImported,
    discard_files,
    import_subtask,
)
from flinkstate.flink.bridge.importer import ImportReport, plan_import, run_import
from flinkstate.flink.bridge.store_export import plan_export, run_export
from flinkstate.flink.write.savepoint_folder import KeyedFile
from flinkstate.flink.write.savepoint_writer import DEFAULT_FLINK_VERSION
from pyspark.accumulators import AccumulatorParam

__all__ = ["cli_runners", "export_runner", "export_savepoint", "import_runner", "import_savepoint", "run_tasks"]


def run_tasks(spark: Any, description: str, fn: Any, jobs: list[Any]) -> list[Any]:
    """fn over jobs as one Spark job, one task per job, under description in Spark's UI; the results in job order."""
    sc = spark.sparkContext
    sc.setJobDescription(description)
    try:
        return sc.parallelize(jobs, len(jobs)).map(fn).collect()
    finally:
        sc.setJobDescription(None)


class _Written(AccumulatorParam):  # type: ignore[misc]
    """The results of the import tasks that finished: a failed job deletes their files."""

    def zero(self, value: list[SubtaskImported]) -> list[SubtaskImported]:
        return []

    def addInPlace(self, a: list[SubtaskImported], b: list[SubtaskImported]) -> list[SubtaskImported]:
        a.extend(b)
        return a


def import_runner(spark: Any) -> ImportRunner:
    """Run import jobs as one Spark job, one task per Flink subtask handle; the results come back to the driver.

    Nothing is committed when the job fails. A failed task deletes its own files, and the driver those of the tasks
    whose results reached it (an accumulator); a task still running when Spark aborted the job may leave files that
    no checkpoint references (`collect_orphans` deletes them), as any Spark write to the root may."""

    def run(jobs: list[SubtaskImport]) -> list[SubtaskImported]:
        sc = spark.sparkContext
        written = sc.accumulator([], _Written())

        def one(job: SubtaskImport) -> SubtaskImported:
            res = import_subtask(job)
            written.add([res])
            return res

        try:
            return run_tasks(spark, f"flinkstate: import {len(jobs)} Flink subtasks of {jobs[0].meta.path}", one, jobs)
        except BaseException:
            discard_files(jobs[0].io, written.value)
            raise

    return run


def export_runner(spark: Any) -> ExportRunner:
    """Write the subtasks' keyed files as one Spark job, one task per subtask (key-group range)."""

    def run(jobs: list[RangeExport]) -> list[KeyedFile]:
        return run_tasks(spark, f"flinkstate: export {len(jobs)} Flink subtasks to {os.path.dirname(jobs[0].folder)}",
                         export_range, jobs)

    return run


def import_savepoint(
    spark: Any,
    flink_path: str | os.PathLike[str],
    root: str | os.PathLike[str],
    *,
    flink_checkpoint_id: int | None = None,
    ttl: Mapping[str, StateTtlConfig | int] | None = None,
    storage_options: dict[str, Any] | None = None,
    uids: Iterable[str] = (),
    raw_values: bool = True,
    kryo_classes: str | Iterable[str] | Mapping[str, str] | None = None,
) -> ImportReport:
    """`flinkstate.flink.bridge.importer.import_savepoint` with one Spark task per Flink subtask handle (executors
    decode and write, the driver commits once); the same options and the same result."""
    plan = plan_import(flink_path, root, flink_checkpoint_id=flink_checkpoint_id, ttl=ttl, storage_options=storage_options,
                       uids=uids, raw_values=raw_values, kryo_classes=kryo_classes)
    return run_import(plan, import_runner(spark))


def export_savepoint(
    spark: Any,
    store_or_root: Any,
    dest: str | os.PathLike[str],
    *,
    checkpoint_id: int | None = None,
    compression: bool = False,
    pojo_classes: Mapping[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    flink_version: str = DEFAULT_FLINK_VERSION,
) -> str:
    """`flinkstate.flink.bridge.store_export.export_savepoint` with one Spark task per Flink subtask (executors read a
    key-group range and write its keyed file, the driver writes `_metadata`); the same options and the same savepoint."""
    plan = plan_export(store_or_root, dest, checkpoint_id=checkpoint_id, compression=compression, pojo_classes=pojo_classes,
                       storage_options=storage_options, flink_version=flink_version)
    return run_export(plan, export_runner(spark))


def cli_runners(master: str | None = None) -> tuple[ImportRunner, ExportRunner]:
    """The runners of `flinkstate import|export --spark [MASTER]`: a session on MASTER, else the active one, else a
    local one whose workers run this interpreter (`cli_session`)."""
    from pyspark_flinkstate.workers import cli_session

    spark = cli_session("flinkstate import/export", master)
    return import_runner(spark), export_runner(spark)
