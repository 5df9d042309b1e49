"""Stress: many processes committing, rewriting, compacting, expiring, discarding and collecting on one root.

    PYTHONPATH=python:connector:tests python bench/stress_concurrency.py [--seeds N] [--first-seed S] [--processes P]
        [--rounds R] [--s3]

The workload and the model are tests/concurrency_model.py (what test_registry_processes.py runs with 4 processes
and 12 rounds). Every seed runs P spawned processes for R rounds each on a fresh root (local disk, or a moto S3
server started here with --s3), then checks every retained checkpoint against the model of what was committed and
runs `flinkstate verify`; a checkpoint in the log that no worker saw commit (a commit reported as failed that had
landed, which a retry would write twice) fails it too. Prints per seed: commits, retained checkpoints, retried conflicts, collections, seconds;
any lost or wrong checkpoint stops the run with the model's message.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import tempfile
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import concurrency_model as model


def _moto() -> tuple[Any, dict[str, Any], str]:
    import boto3
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    bucket = f"stress-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket=bucket)
    return server, {"endpoint_url": endpoint, "key": "testing", "secret": "testing", "region": "us-east-1"}, bucket


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0, help="run seeds first-seed .. first-seed+seeds-1")
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--s3", action="store_true")
    args = ap.parse_args()
    server, opts, bucket = _moto() if args.s3 else (None, None, "")
    total = {"commits": 0, "conflicts": 0, "collections": 0}
    print(f"{'seed':>5} {'commits':>8} {'retained':>9} {'conflicts':>10} {'collections':>12} {'seconds':>8}")
    try:
        with tempfile.TemporaryDirectory() as tmp, \
                ProcessPoolExecutor(args.processes, mp_context=mp.get_context("spawn")) as pool:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                root = f"s3://{bucket}/seed{seed}" if args.s3 else f"{tmp}/seed{seed}"
                t0 = time.perf_counter()
                futures = [pool.submit(model.worker, root, opts, w, args.rounds, seed * 1000 + w) for w in range(args.processes)]
                figures = model.check_root(root, opts, [f.result() for f in futures])
                for k in total:
                    total[k] += figures[k]
                print(f"{seed:>5} {figures['commits']:>8} {figures['retained']:>9} {figures['conflicts']:>10} "
                      f"{figures['collections']:>12} {time.perf_counter() - t0:>8.1f}", flush=True)
    finally:
        if server is not None:
            server.stop()
    print(f"{args.seeds} seeds x {args.processes} processes x {args.rounds} rounds on {'s3 (moto)' if args.s3 else 'local disk'}: "
          f"{total['commits']} commits, {total['conflicts']} retried conflicts, {total['collections']} retain/discard calls, "
          "every retained checkpoint equal to the model")


if __name__ == "__main__":
    main()
