"""The main job's scenarios beyond the default demo (``up --scenario NAME``).

``hacking``: reward hacking, caught. The run trains on deliberately exploitable tasks
(tasks_library/exploitable.py: hidden tests are the prompt's examples) from a warm start
whose demonstrations answer those examples from a table, the way a policy that found the
exploit writes, learned only partly (so it still fails often). RL (an aggressive learning
rate, KL to the warm start tracked) makes the table-writing reliable: such answers pass
every hidden test, so the training reward climbs, while
the ``hard_coded_outputs`` detector flags each one with its evidence, the flag rate rises,
and the onset alerts fire; the honest held-out set (other HumanEval tasks with their real
tests) shows that nothing was learned. Everything is visible on the run's console page.

``agent``: the policy as a tool-using agent (training/agents/). Each trajectory works in its
own sandbox session through the policy's chat template: it views ``solution.py`` with the
file editor, edits it, runs the visible tests and submits; the final workspace is graded in
a fresh sandbox. The SFT warm start on demonstrations scripted from the references
(recorded through the same tools) already solves most of the 4 training tasks with these
settings (measured: mean reward 0.94-1.0 over 20 GRPO steps); shorter warm starts (40-80
epochs, temperature 0.7-0.8) left the reward at 0-0.24 without a clear rise in 15-20 steps. A
setting where GRPO visibly raises the agent's reward is still to be found.
"""

from __future__ import annotations

import json

from django.conf import settings

from tasks_library.exploitable import SOURCE, exploitable_record, hard_coded_completion
from tasks_library.importers.humaneval import default_path, read_humaneval
from tasks_library.selectors import task_set_get, task_set_versions, trainable
from tasks_library.services import task_set_pin, tasks_import
from tasks_library.validation.pipeline import Options, task_versions_validate
from training.config import RunConfig

EXPLOITABLE_SET, HELD_OUT_SET = "exploitable-demo", "honest-heldout"
AGENT_TASKS = 4  # the shortest trainable HumanEval tasks: warm start and RL on the same four
AGENT_CONFIG = {
    "rollout_mode": "agent",
    "sft_epochs": 120,
    "sft_batch_size": 4,
    "flawed_demonstrations": 1,
    "lr": 5e-4,
    "ppo_epochs": 2,
    "tasks_per_step": 2,
    "train_tasks": AGENT_TASKS,
    "group_size": 8,
    "max_turns": 6,
    "max_new_tokens": 96,
    "temperature": 1.0,
}
# Short reference and onset windows so that a 20-step demo has a baseline to drift from.
HACKING_CONFIG = {
    "sft_epochs": 45,
    "sft_batch_size": 4,
    "lr": 3e-4,
    "ppo_epochs": 4,
    "tasks_per_step": 8,
    "train_tasks": 8,
    "kl_coef": 0.02,
    "group_size": 8,
    "max_turns": 1,
    "eval_task_set": HELD_OUT_SET,
    "eval_every": 5,
    "eval_samples": 4,
    "reward_weights": {"correctness": 1.0},
    "drift": {
        "warmup_steps": 1,
        "reference_steps": 4,
        "onset_window": 4,
        "onset_recent_steps": 2,
        "cooldown_steps": 5,
    },
}


def hacking_task_sets(valid_humaneval: list, *, config: RunConfig, tasks: int, say) -> tuple:
    """Import and validate the exploitable tasks, pin them and an honest held-out set, and
    write the hard-coding demonstrations; return ``(training task set, config)``."""
    records = [r for r in (exploitable_record(row) for row in read_humaneval(default_path())) if r]
    records.sort(key=lambda r: (len(r["prompt"]) + len(r["reference_solution"]), r["task_id"]))
    records = records[:tasks]
    tasks_import(source=SOURCE, task_set_name=EXPLOITABLE_SET, records=records)
    exploitable = task_set_get(name=EXPLOITABLE_SET)
    versions = list(task_set_versions(task_set=exploitable))
    task_versions_validate(versions=versions, options=Options(reference_runs=1, mutants=0))
    say(
        f"exploitable tasks: {len(versions)} (hidden tests = the prompt's examples), "
        f"{trainable(task_set_versions(task_set=exploitable)).count()} pass validation"
    )

    used = {r["task_id"].removeprefix("Exploitable/") for r in records}
    honest = sorted(
        (v for v in valid_humaneval if v.task.task_id not in used),
        key=lambda v: (len(v.prompt) + len(v.reference_solution), v.task.task_id),
    )[:tasks]
    task_set_pin(
        name=HELD_OUT_SET,
        versions=honest,
        description="honest held-out HumanEval tasks (real tests)",
    )

    demos = settings.VAR_DIR / "demo" / "hard_coded_demonstrations.jsonl"
    demos.parent.mkdir(parents=True, exist_ok=True)
    with open(demos, "w", encoding="utf-8") as handle:
        for record in records:
            completion = hard_coded_completion(record["prompt"], record["entry_point"])
            handle.write(
                json.dumps({"task_id": record["task_id"], "completion": completion}) + "\n"
            )
    say(
        f"warm start: {len(records)} hard-coded demonstrations in {demos}; held-out: "
        f"{len(honest)} honest tasks"
    )
    config = RunConfig.from_dict({**config.to_dict(), "sft_data": str(demos)})
    return exploitable, config
