"""State maintenance as Spark jobs: compaction and TTL expiry with one Spark task per key-group range.

The driver plans with the core (`flinkstate.store.maintenance`), each task reads one range through
its scan task and writes one full file (`run_range` on an executor), and the driver commits
every file in one checkpoint. Spark's console progress bar stays on; the core prints one
summary line per state.
"""

from __future__ import annotations

from typing import Any

from flinkstate.core.policy import CompactionPolicy
from flinkstate.store.maintenance import (
    MaintenanceResult,
    Progress,
    RangeJob,
    RangeResult,
    Runner,
    run_range,
)

__all__ = ["compact", "expire", "spark_runner", "cli_runner"]


def spark_runner(spark: Any) -> Runner:
    """Run range jobs as one Spark job, one task per key-group range; the results come back to the driver."""

    def run(jobs: list[RangeJob]) -> list[RangeResult]:
        from pyspark_flinkstate.flink_jobs import run_tasks  # the Flink bridge, imported when a job runs

        states = sorted({f"{j.operator}/{j.name}" for j in jobs})
        return run_tasks(spark, f"flinkstate: rewrite {len(jobs)} key-group ranges of {', '.join(states)}", run_range, jobs)

    return run


def _open(root: str, storage_options: dict[str, Any] | None) -> Any:
    import flinkstate

    return flinkstate.open(root, storage_options)


def compact(spark: Any, root: str, operator: str | None = None, state: str | None = None, *, policy: CompactionPolicy | None = None,
            storage_options: dict[str, Any] | None = None, progress: Progress | None = None) -> MaintenanceResult:
    """`store.compact` with the per-range merge as Spark tasks (executors write the files, the driver commits once)."""
    return _open(root, storage_options).compact(operator, state, policy=policy, progress=progress, run=spark_runner(spark))


def expire(spark: Any, root: str, operator: str | None = None, state: str | None = None, *, at: int | None = None,
           storage_options: dict[str, Any] | None = None, progress: Progress | None = None) -> MaintenanceResult:
    """`store.expire` with the per-range rewrite as Spark tasks (executors write the files, the driver commits once)."""
    return _open(root, storage_options).expire(operator, state, at=at, progress=progress, run=spark_runner(spark))


def cli_runner(what: str = "maintenance", master: str | None = None) -> Any:
    """The runner of `flinkstate compact|expire --spark`: the active SparkSession, or a local one with the progress bar on.

    what="import" or "export": the runner of `flinkstate import|export --spark [MASTER]` (`flink_jobs.cli_runners`),
    found through the same entry point."""
    if what in ("import", "export"):
        from pyspark_flinkstate.flink_jobs import cli_runners

        runners = cli_runners(master)
        return runners[0] if what == "import" else runners[1]
    from pyspark_flinkstate.workers import cli_session

    return spark_runner(cli_session("flinkstate maintenance"))
