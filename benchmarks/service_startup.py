"""How long does the example bench take to give a trial its tracker service? Target: <= 0.5 s.

    .venv/bin/python benchmarks/service_startup.py [--runs 30]

Times the example bench's own hooks (conftest.py at the repo root) as the plugin calls them for
every trial: pytest_benchcell_provision (start the server process on 127.0.0.1 with an ephemeral
port and fresh tokens, wait for its address, seed it through the admin API) and one
pytest_benchcell_ready (read the whole seed back with the agent's token), then, apart,
pytest_benchcell_teardown (stop the process). One warm-up run, then --runs runs. Prints the median,
the 90th percentile and the maximum of each phase and of provision + ready.
"""

from __future__ import annotations

import importlib.util
import statistics
import tempfile
import time
from pathlib import Path

import harness

from pytest_benchcell.environment import TrialInfo

ROOT = Path(__file__).resolve().parent.parent


def load_hooks():
    spec = importlib.util.spec_from_file_location("example_bench_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_run(hooks) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        trial = TrialInfo("raw-api", "close-export", "single-mutation", 1, "scripted", Path(folder), Path(folder))
        start = time.perf_counter()
        environment = hooks.pytest_benchcell_provision(trial=trial)
        provisioned = time.perf_counter()
        assert hooks.pytest_benchcell_ready(trial=trial, environment=environment) is True
        ready = time.perf_counter()
        hooks.pytest_benchcell_teardown(trial=trial, environment=environment)
        stopped = time.perf_counter()
    return {"provision": provisioned - start, "ready": ready - provisioned,
            "provision + ready": ready - start, "teardown": stopped - ready}  # fmt: skip


def main() -> None:
    args = harness.parser(__doc__, runs=30).parse_args()
    hooks = load_hooks()
    one_run(hooks)  # warm-up: imports, page cache
    runs = [one_run(hooks) for _ in range(args.runs)]
    print(f"{args.runs} runs of the example bench's per-trial service hooks")
    for phase in runs[0]:
        values = sorted(run[phase] * 1000 for run in runs)
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        print(f"  {phase:<17} median {statistics.median(values):6.1f} ms   p90 {p90:6.1f} ms   max {values[-1]:6.1f} ms")
    total = statistics.median(run["provision + ready"] for run in runs)
    print(f"provision + ready: median {total * 1000:.0f} ms (target <= 500 ms: {'met' if total <= 0.5 else 'missed'})")


if __name__ == "__main__":
    main()
