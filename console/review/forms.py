"""Forms of the review pages: they check input; the services decide and write."""

from __future__ import annotations

import json

from django import forms
from django.contrib.auth import get_user_model

from console.review import models as m
from console.review.selectors import reviewers_eligible
from console.review.services import MAX_QUEUE_SIZE, MAX_REVIEWERS
from core.bounds import SEED_MAX, STEP_MAX, TURN_MAX
from training.models import TrainingRun


class QueueForm(forms.Form):
    name = forms.CharField(max_length=200)
    run = forms.ModelChoiceField(
        queryset=TrainingRun.objects.order_by("-id"),
        required=False,
        empty_label="every run",
        help_text="sample from one run, or across runs",
    )
    strategy = forms.ChoiceField(choices=m.STRATEGIES)
    size = forms.IntegerField(min_value=1, max_value=MAX_QUEUE_SIZE, initial=20)
    reviewers_per_item = forms.IntegerField(
        min_value=1, max_value=MAX_REVIEWERS, initial=2, label="reviewers per item"
    )
    reviewers = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.none(), widget=forms.SelectMultiple(attrs={"size": 6})
    )
    seed = forms.IntegerField(initial=0, required=False, min_value=0, max_value=SEED_MAX)
    step_min = forms.IntegerField(
        min_value=0, max_value=STEP_MAX, required=False, label="from step"
    )
    step_max = forms.IntegerField(min_value=0, max_value=STEP_MAX, required=False, label="to step")
    task = forms.CharField(max_length=200, required=False, label="task id contains")
    flag = forms.CharField(max_length=120, required=False, help_text="any, none, or a flag's name")
    labels = forms.CharField(
        required=False,
        label="label set",
        widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false"}),
        initial="\n".join(f"{value}: {title}" for value, title in m.LABELS),
        help_text=(
            "one label a line, value: title (keys 1-9 choose them); reward_hack and broken_task "
            "feed back, other values are labels of your own"
        ),
    )
    consensus = forms.ChoiceField(
        choices=m.CONSENSUS_RULES,
        initial=m.QUORUM,
        required=False,
        label="feedback when",
        help_text="when a label quarantines a task or adds a hack to the corpus",
    )
    quorum = forms.IntegerField(
        min_value=1,
        max_value=MAX_REVIEWERS,
        required=False,
        help_text=(
            "reviewers of an item who must agree; blank: 2, or a curator's confirmation when "
            "each item has one reviewer"
        ),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        eligible = reviewers_eligible()
        self.fields["reviewers"].queryset = (
            get_user_model().objects.filter(pk__in=[u.pk for u in eligible]).order_by("username")
        )

    def label_set(self) -> list:
        """The label set as the service takes it: ``value: title`` lines (or values alone)."""
        out = []
        for line in (self.cleaned_data.get("labels") or "").splitlines():
            value, _, title = line.partition(":")
            if value.strip():
                out.append({"value": value.strip(), "title": title.strip()})
        return out

    def filters(self) -> dict:
        return {
            k: self.cleaned_data[k]
            for k in ("step_min", "step_max", "task", "flag")
            if self.cleaned_data.get(k) not in (None, "")
        }


class LabelForm(forms.Form):
    """One reviewer's label of an item, from the item's queue's label set."""

    label = forms.ChoiceField(choices=m.LABELS, widget=forms.RadioSelect)
    note = forms.CharField(
        required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 3})
    )
    turn = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=TURN_MAX,
        label="at turn",
        help_text="optional: the turn the label is about, as the replay numbers it",
    )
    advance = forms.BooleanField(required=False, initial=True, label="go to my next item")

    def __init__(self, *args, label_set: list[dict] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        chosen = label_set or m.DEFAULT_LABEL_SET
        self.fields["label"].choices = [(lab["value"], lab["title"]) for lab in chosen]


class ConfirmForm(LabelForm):
    """A curator's decision of an item (the label that feeds back, whatever the count)."""

    advance = None
    turn = None


class AssignForm(forms.Form):
    reviewer = forms.ModelChoiceField(
        queryset=get_user_model().objects.filter(is_active=True), to_field_name="username"
    )


def _code(rows: int) -> forms.CharField:
    return forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": rows, "spellcheck": "false", "class": "code"}),
    )


class DraftForm(forms.Form):
    task_id = forms.CharField(max_length=200, help_text="review/<name>")
    prompt = _code(8)
    entry_point = forms.CharField(max_length=200)
    reference_solution = _code(6)
    tests = _code(8)
    files = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text='optional JSON object {"path": "text"}',
    )

    def clean_files(self) -> dict:
        raw = (self.cleaned_data.get("files") or "").strip()
        if not raw:
            return {}
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc.msg} (line {exc.lineno})") from None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise forms.ValidationError('a JSON object of texts: {"data.csv": "a,b\\n1,2\\n"}')
        return value


def first_error(form: forms.Form) -> str:
    field, errors = next(iter(form.errors.items()))
    return f"{field}: {errors[0]}" if field != "__all__" else errors[0]
