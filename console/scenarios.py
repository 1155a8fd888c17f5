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
file editor, inserts a body, runs the visible tests and submits; the final workspace is graded
in a fresh sandbox. The warm start imitates a mixed demonstrator (``flawed_demonstrations``: per
task, the reference's demonstration and one whose body is a mutant the visible tests catch,
submitted anyway), so that every group holds both choices and GRPO has something to learn.

Why (measured on this 2-core machine, shared with other jobs; RL on the four shortest HumanEval
tasks, 2 tasks x 8 trajectories per step; ``groups/zero_advantage`` counts the step's groups
whose rewards are all equal, which teach nothing):

- warm start on the references alone (8 tasks), 120 epochs, lr 1e-4, temperature 0.6 (the
  previous settings): reward 1.0 at 19 of 20 steps, both groups all-equal at 19 of 20 steps
  (``tokens/trained`` 0): nothing to learn;
- the same for 60 epochs (lr 1e-3, temperature 1.0): the policy breaks its tool calls before any
  update (29 parse errors at step 1; 15-37 per step), every trajectory of a group fails alike
  (reward 0-0.14, both groups all-equal at 7 of 7 steps);
- the mixed warm start (one flawed demonstration per task, 120 epochs, temperature 1.0): no
  all-equal group at the first steps (first-step reward 0.25 and 0.31 over two seeds: the
  choice is there), but with ``lr`` 5e-4 the updates broke the tool-call format within four
  steps (parse errors 6 -> 31, clip fraction 0.06-0.08 after one Adam step, reward 0.25 ->
  0.0 and 0.31 -> 0.06): the rise needs a smaller step; ``lr`` is 1e-4 here;
- the mixed warm start for only 60 epochs (SFT loss 0.032 against 0.010 after 120): parse errors
  again before any update (29 at step 1), reward 0-0.06 over 5 steps, groups all-equal.

These settings (the mixed warm start for 90 epochs, SFT loss 0.011 and 0.015, lr 1e-4), both
runs stopped for time before their 20 steps (up's default): no all-equal group at most steps, the
parse errors do not grow (6-13 per step), and

- seed 0, 14 steps: rewards 0.31 0.19 0.50 0.25 0.44 0.31 0.44 0.56 0.44 0.62 0.62 0.69 0.31
  0.56; mean of the first 5 steps 0.338, of the last 5 0.562: it rises;
- seed 1, 16 steps: 0.31 0.19 0.19 0.38 0.12 0.25 0.31 0.31 0.31 0.56 0.44 0.19 0.50 0.06 0.25
  0.19; first 5 0.237, last 5 0.237: it does not.

So the reward does not yet rise reproducibly. Each step took about a minute with two runs side
by side on this loaded machine (SFT 90 epochs: about 8 minutes), so the 20-step scenario takes
about 15-25 minutes here. Next to try: more steps, a KL penalty to the warm start, and a smaller
learning rate with more PPO epochs.
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
    "sft_epochs": 90,
    "sft_batch_size": 4,
    "flawed_demonstrations": 1,
    "lr": 1e-4,
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
