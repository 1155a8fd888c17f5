"""The launch form (``/runs/new/``): what a run trains on and for how long, its rollout mode and
the key settings as fields with their ranges, and the raw config for every other key.

Each key setting is a field of ``training.config.RunConfig``: its widget carries the key's range
(``min``, ``max``: ``MAXIMA`` and the config's own rules) and shows its default; a field left
blank is not set. The raw config (``KEY=VALUE`` lines or a JSON object, as ``train --set``)
holds the other keys; a key that has a field of its own is set there, and the raw config
setting it to something else is refused naming the key. Everything is checked by
``RunConfig.from_dict`` (and the launch checks of ``training.services.run_create``) before a run
exists; an error lands on the field it is about.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from django import forms

from tasks_library.models import TaskSet
from training.config import MAXIMA, ROLLOUT_MODES, ConfigError, RunConfig, parse_overrides


@dataclass(frozen=True)
class KeySetting:
    """A config key with a field of its own: its label, what it does, and its lowest value."""

    key: str
    label: str
    help: str
    minimum: float
    agent_only: bool = False


KEY_SETTINGS = (
    KeySetting("group_size", "group size", "trajectories per task and step: GRPO compares them", 2),
    KeySetting("tasks_per_step", "tasks per step", "groups rolled out per step, one task each", 1),
    KeySetting("max_turns", "turns", "turns per trajectory at most", 1),
    KeySetting(
        "max_new_tokens", "tokens per turn", "tokens the policy samples per turn at most", 1
    ),
    KeySetting(
        "max_prompt_tokens",
        "prompt tokens",
        "a task whose prompt is longer is left out of training (the run warns)",
        1,
    ),
    KeySetting(
        "max_tokens",
        "trajectory tokens",
        "the whole trajectory's budget: prompt, turns, observations (0: the model's context)",
        0,
        agent_only=True,
    ),
    KeySetting("train_tasks", "training tasks", "the RL pool: shortest prompts first", 1),
    KeySetting("lr", "learning rate", "of the RL updates (above 0)", 0),
    KeySetting("temperature", "temperature", "of sampling (above 0)", 0),
    KeySetting("kl_coef", "KL coefficient", "penalty towards the post-SFT policy (0: none)", 0),
    KeySetting("sft_epochs", "SFT epochs", "warm start on the demonstrations (0: none)", 0),
    KeySetting("seed", "seed", "of everything the run draws", 0),
)
KEY = re.compile(r"config key '([a-z_]+)'")


def parse_config_text(text: str) -> dict:
    """Config overrides from the form: a JSON object, or ``KEY=VALUE`` lines (values read as
    JSON, else text, as ``train --set``); blank lines and ``#`` comments are skipped.

    Raises:
        ConfigError: malformed JSON, a JSON value that is not an object, or a line without ``=``.
    """
    text = (text or "").strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"config overrides are not valid JSON: {exc.msg} (line {exc.lineno}, "
                f"column {exc.colno})"
            ) from None
        if not isinstance(data, dict):
            raise ConfigError('config overrides in JSON must be one object: {"key": value, ...}')
        return data
    lines = [line.strip() for line in text.splitlines()]
    pairs = [line for line in lines if line and not line.startswith("#")]
    for line in pairs:
        key, sep, _value = line.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"line {line!r}: write KEY=VALUE, for example lr=1e-4")
    return parse_overrides(
        [f"{k.strip()}={v.strip()}" for k, _s, v in (p.partition("=") for p in pairs)]
    )


def launch_config(overrides: dict, *, steps: int, backend: str) -> RunConfig:
    """The run configuration of a launch (the form's and the API's): ``overrides`` on
    ``RunConfig``'s defaults, ``steps`` given apart, and a Kubernetes spec checked for that
    backend.

    Raises:
        ConfigError: naming the config key (``steps`` among the overrides, too).
    """
    if "steps" in overrides:
        raise ConfigError(
            "config key 'steps': set the number of steps in the Steps field, not here"
        )
    config = RunConfig.from_dict({**overrides, "steps": steps})
    if backend == "kubernetes":
        # Imported here: the web loads the kubernetes client only to check such a launch.
        from training.kubernetes import KubernetesSpec  # noqa: PLC0415

        KubernetesSpec.from_config(config.kubernetes)
    return config


def key_field(setting: KeySetting) -> forms.Field:
    """The form field of ``setting``: a number with the key's range, blank meaning its default."""
    default = getattr(RunConfig(), setting.key)
    top = MAXIMA[setting.key]
    kind = forms.FloatField if isinstance(default, float) else forms.IntegerField
    shown = f"{setting.minimum:g}"
    highest = f"{int(top):,}" if kind is forms.IntegerField else f"{top:g}"
    attrs = {
        "min": shown,
        "max": f"{top:g}",
        "step": "any" if kind is forms.FloatField else "1",
        "placeholder": f"{default:g}",
        "class": "key-setting",
    }
    if setting.agent_only:
        attrs["data-agent-only"] = "1"
    return kind(
        required=False,
        label=setting.label[:1].upper() + setting.label[1:],
        min_value=setting.minimum,
        max_value=top,
        error_messages={
            "min_value": f"at least %(limit_value)s ({setting.key}: {shown} to {highest})",
            "max_value": f"at most %(limit_value)s ({setting.key}: {highest} at most)",
        },
        widget=forms.NumberInput(attrs=attrs),
        help_text=f"{setting.help}; {shown} to {highest}, default {default:g}",
    )


class RunLaunchForm(forms.Form):
    name = forms.CharField(
        required=False, max_length=200, help_text="a short name for the runs table (optional)"
    )
    description = forms.CharField(
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 70}),
        help_text="what this run tries (optional)",
    )
    tags = forms.CharField(
        required=False,
        max_length=900,
        help_text="words separated by spaces or commas, e.g. sweep lr-1e-4 (optional)",
    )
    task_set = forms.ModelChoiceField(
        queryset=TaskSet.objects.order_by("name"),
        empty_label=None,
        help_text="what the run trains on: the set's valid, unquarantined versions",
    )
    steps = forms.IntegerField(
        min_value=1,
        max_value=int(MAXIMA["steps"]),
        initial=20,
        widget=forms.NumberInput(attrs={"min": 1, "max": int(MAXIMA["steps"])}),
        help_text=f"GRPO steps: 1 to {int(MAXIMA['steps']):,}",
    )
    rollout_mode = forms.ChoiceField(
        required=False,
        label="Rollout mode",
        choices=[
            ("completion", "completion: the policy writes the function, revised on test results"),
            ("agent", "agent: tool calls in a sandbox session (repository tasks need it)"),
        ],
        initial=RunConfig().rollout_mode,
        help_text="how trajectories are rolled out",
    )
    backend = forms.ChoiceField(
        choices=[
            ("local", "local (a trainer process on this host)"),
            ("kubernetes", 'kubernetes (a Job; set kubernetes={"image": ...})'),
        ],
        initial="local",
    )
    config = forms.CharField(
        required=False,
        label="Raw config",
        widget=forms.Textarea(
            attrs={
                "rows": 6,
                "cols": 70,
                "spellcheck": "false",
                "placeholder": 'reward_weights={"correctness": 1.0, "quality": 0.2}\n'
                "hack_policy=zero\n\n"
                'or one JSON object: {"ppo_epochs": 2, "clip_high": 0.28}',
            }
        ),
        help_text=(
            "every other key, as KEY=VALUE lines (values read as JSON) or a JSON object; "
            "training/config.py lists them all"
        ),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for setting in KEY_SETTINGS:
            self.fields[setting.key] = key_field(setting)
        self.fields["rollout_mode"].choices = [
            (mode, title) for mode, title in self.fields["rollout_mode"].choices
            if mode in ROLLOUT_MODES
        ]  # fmt: skip
        self.repository_sets = list(
            TaskSet.objects.filter(members__task_version__workspace__isnull=False)
            .distinct()
            .values_list("pk", flat=True)
        )

    def groups(self) -> list[tuple[str, list]]:
        """The form's fields in the order the page shows them, by heading."""
        keys = [s.key for s in KEY_SETTINGS]
        return [
            ("The run", [self[n] for n in ("name", "description", "tags")]),
            ("What it trains, how", [self[n] for n in ("task_set", "steps", "rollout_mode")]),
            ("Key settings", [self[n] for n in keys]),
            ("Where, and every other key", [self["backend"], self["config"]]),
        ]

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            raw = parse_config_text(cleaned.get("config", ""))
        except ConfigError as exc:
            self.add_error("config", str(exc))
            return cleaned
        fields = {s.key: cleaned[s.key] for s in KEY_SETTINGS if cleaned.get(s.key) is not None}
        if cleaned.get("rollout_mode"):
            fields["rollout_mode"] = cleaned["rollout_mode"]
        for key, value in fields.items():
            if key in raw and raw[key] != value:
                self.add_error(
                    "config",
                    f"config key {key!r} has a field of its own, set to {value!r}; the raw "
                    f"config sets it to {raw[key]!r}: set it in one place",
                )
                return cleaned
        try:
            cleaned["run_config"] = launch_config(
                {**raw, **fields}, steps=cleaned["steps"], backend=cleaned["backend"]
            )
        except ConfigError as exc:
            self.add_error(self.field_of(exc, fields), str(exc))
        return cleaned

    def field_of(self, exc: ConfigError, fields: dict) -> str:
        """Where a config error goes: the field of the key it names when that field set it, else
        the raw config."""
        named = exc.field or (KEY.search(str(exc)) or [None, None])[1]
        return named if named in fields and named in self.fields else "config"
