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

Why these settings (measured on this 2-core machine, shared with other jobs; RL on the four
shortest HumanEval tasks; ``groups/zero_advantage`` counts a step's groups whose rewards are all
equal, which teach nothing):

- warm start on the references alone: reward 1.0 at 19 of 20 steps, every group all-equal:
  nothing to learn;
- 60 SFT epochs (of either warm start): the policy breaks its tool calls before any update (29
  parse errors at step 1), every group fails alike;
- the mixed warm start for 90 epochs (SFT loss 0.011-0.015) sampled at temperature 1.0, 2 tasks
  x 8 trajectories per step: 6-13 parse errors per step of 16 trajectories (the low-probability
  tail of every token, over a few hundred sampled tokens), reward 0.2-0.3 at the start, and the
  rise not reproducible (seed 0: first 5 steps 0.338, last 5 0.562; seed 1: 0.237 and 0.237);
  ``lr`` 5e-4 broke the call format within four steps (reward 0.25 -> 0.0);
- the same warm start sampled at **temperature 0.7**: the tail is gone (0-2 parse errors per
  step) while the choice the mixed demonstrator left (reference or flawed body: near even odds,
  which a temperature keeps even) stays, so GRPO learns that choice alone; and **every task at
  every step** (4 tasks x 4 trajectories, the same 16 per step as before), so that the step's
  mean compares the same tasks from step to step instead of whichever two were drawn.

Measured with these settings (20 steps, ``lr`` 1e-4, 2 PPO epochs), each seed's warm start
and RL on its own:

- seed 0: 0.50 0.56 0.94 0.75 0.75 0.94 0.81 0.88 0.81 0.88 0.81 0.62 0.62 0.94 0.94 0.94 0.69
  1.00 1.00 0.88; first 5 steps 0.700, last 5 0.900;
- seed 1: 0.19 0.38 0.31 0.56 0.56 0.69 0.81 0.75 0.69 0.75 0.62 0.69 0.69 0.75 0.56 0.75
  0.62 0.69 0.62 0.69; first 5 steps 0.400, last 5 0.675;
- seed 2: 0.25 0.62 0.50 0.62 0.69 0.56 0.69 0.62 0.81 0.75 0.69 0.62 0.69 0.81 0.88 0.81 0.69
  0.81 0.88 0.69; first 5 steps 0.538, last 5 0.775.

The reward rises with each seed, most in the first steps: the flawed body loses its share. Of
the 52 failing trajectories of the last 5 steps (of 240, three seeds), 3 still wrote the flawed
demonstration's body; 33 wrote a body that is neither (a sampled line gone wrong) and 16 none
(the insert call broken or never made): what a small sampled policy gets wrong otherwise.

A step took 22-46 s on average (two runs and a benchmark side by side), the warm start (90
epochs) 78 s alone and 7-10 minutes beside the others: seed 0's whole run took 15 minutes.
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
    "tasks_per_step": AGENT_TASKS,  # every task at every step: the step's mean compares alike
    "train_tasks": AGENT_TASKS,
    "group_size": 4,
    "max_turns": 6,
    "max_new_tokens": 96,
    "temperature": 0.7,
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

    demos = settings.SFT_DATA_DIR / "hard_coded_demonstrations.jsonl"
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
