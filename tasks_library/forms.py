"""Input of the curation pages and API: filters, edits, bulk curation, task set pins.

The pages render these forms; the API validates its query parameters with
:class:`FilterForm` too, so both accept exactly the same filters.
"""

from __future__ import annotations

import re

from django import forms

from core.bounds import ID_MAX
from tasks_library.difficulty import BUCKET_NAMES
from tasks_library.models import TaskSet, TaskVersion
from tasks_library.repositories import REPOSITORY_EDITABLE
from tasks_library.selectors import task_versions_filter
from tasks_library.services import MAX_TIMEOUT_S

AT_MOST_SECONDS = {"max_value": "must be at most %(limit_value)s seconds"}

STATUSES = ("quarantined", "trainable", "pending")
TASK_SET_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
TASK_SET_NAME_RULE = "a new task set's name is 1 to 100 letters, digits, '.', '_' or '-'"


def task_set_name_ok(name: str) -> bool:
    """True for a well-formed new name, or the name of a task set that exists (imports may name sets
    freely)."""
    return bool(TASK_SET_NAME.match(name)) or TaskSet.objects.filter(name=name).exists()


class FilterForm(forms.Form):
    """Which task versions to list. Every field is optional; blank means any."""

    source = forms.CharField(required=False, max_length=60)
    verdict = forms.ChoiceField(
        required=False, choices=[("", "any verdict"), *((v, v) for v, _ in TaskVersion.VERDICTS)]
    )
    status = forms.ChoiceField(
        required=False, choices=[("", "any status"), *((s, s) for s in STATUSES)]
    )
    difficulty = forms.ChoiceField(
        required=False, choices=[("", "any difficulty"), *((b, b) for b in BUCKET_NAMES)]
    )
    tag = forms.CharField(required=False, max_length=100)
    search = forms.CharField(required=False, max_length=200)
    all_versions = forms.BooleanField(
        required=False, help_text="every version, not only the latest of each task"
    )

    FILTERS = ("source", "verdict", "status", "difficulty", "tag", "search")

    def versions(self):
        """The matching task versions (the form must be valid), task loaded, heavy text columns
        deferred."""
        data = self.cleaned_data
        versions = task_versions_filter(
            **{k: data[k] for k in self.FILTERS}, latest_only=not data["all_versions"]
        )
        return (
            versions.select_related(None)
            .select_related("task")
            .defer("report", "prompt", "reference_solution", "files", "verdict_reasons")
        )

    def active(self) -> dict[str, str]:
        """The filters in use, as query parameters (to carry across pages and forms)."""
        return {k: v for k, v in self.cleaned_data.items() if v} if self.is_valid() else {}


class IdListField(forms.Field):
    """Task version ids, from repeated ``ids`` inputs (checkboxes)."""

    widget = forms.MultipleHiddenInput
    default_error_messages = {
        "required": "select at least one task version",
        "invalid": "expected task version ids",
    }

    def to_python(self, value) -> list[int]:
        if not value:
            return []
        try:
            return [int(v) for v in value]
        except (TypeError, ValueError):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None


class CurationForm(forms.Form):
    """A bulk action on the selected versions; a written reason is required."""

    action = forms.ChoiceField(
        choices=[("quarantine", "quarantine"), ("approve", "approve"), ("validate", "validate")]
    )
    ids = IdListField()
    reason = forms.CharField(
        max_length=2000,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "reason (required to quarantine, approve)"}),
    )


class VersionCurationForm(forms.Form):
    """Quarantine (or confirm a quarantine) or approve one version from its task's page. The
    reason is checked by the services, whose message says what to write."""

    number = forms.IntegerField(min_value=1, max_value=ID_MAX)
    action = forms.ChoiceField(choices=[("quarantine", "quarantine"), ("approve", "approve")])
    reason = forms.CharField(required=False, max_length=2000)


def _text(**attrs) -> forms.CharField:
    # strip=False: leading indentation of a reference solution is code.
    return forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(
            attrs={"rows": attrs.pop("rows", 10), "spellcheck": "false", **attrs}
        ),
    )


class EditForm(forms.Form):
    """A task version's editable content; submitting makes a new version of its task."""

    prompt = _text(rows=12)
    entry_point = forms.CharField(max_length=200)
    reference_solution = _text(rows=12)
    visible_tests = _text(rows=8)
    hidden_tests = _text(rows=14)
    timeout_s = forms.FloatField(
        label="timeout (seconds)", max_value=MAX_TIMEOUT_S, error_messages=AT_MOST_SECONDS
    )
    test_timeout_s = forms.FloatField(
        label="per-test timeout (seconds, python-check and stdio; blank: none)",
        required=False,
        max_value=MAX_TIMEOUT_S,
        error_messages=AT_MOST_SECONDS,
    )
    setup_code = _text(rows=6)
    change_note = forms.CharField(
        max_length=500,
        widget=forms.TextInput(attrs={"size": 80}),
        help_text="what changed and why; every version records it",
    )
    base = forms.IntegerField(widget=forms.HiddenInput, min_value=1, max_value=ID_MAX)

    CONTENT = (
        "prompt",
        "entry_point",
        "reference_solution",
        "visible_tests",
        "hidden_tests",
        "timeout_s",
        "test_timeout_s",
        "setup_code",
    )

    @classmethod
    def initial_for(cls, version: TaskVersion) -> dict:
        suite = version.test_suite
        return {
            "prompt": version.prompt,
            "entry_point": version.entry_point,
            "reference_solution": version.reference_solution,
            "visible_tests": suite.visible_tests,
            "hidden_tests": suite.hidden_tests,
            "timeout_s": suite.timeout_s,
            "test_timeout_s": suite.test_timeout_s,
            "setup_code": suite.setup_code,
            "base": version.number,
        }

    def clean(self):
        data = super().clean()
        for name in ("prompt", "reference_solution", "visible_tests", "hidden_tests", "setup_code"):
            if name in self.fields and isinstance(data.get(name), str):
                data[name] = data[name].replace("\r\n", "\n")  # browsers send CRLF from a textarea
        return data

    def changes(self, version: TaskVersion) -> dict:
        """The fields whose submitted value differs from ``version``'s."""
        current = self.initial_for(version)
        return {k: self.cleaned_data[k] for k in self.CONTENT if self.cleaned_data[k] != current[k]}


class TestIdsField(forms.CharField):
    """pytest node ids, one a line (blank lines ignored), as a list."""

    def __init__(self, **kwargs):
        super().__init__(
            required=False,
            strip=False,
            widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}),
            **kwargs,
        )

    def to_python(self, value) -> list[str]:
        return [line.strip() for line in (value or "").splitlines() if line.strip()]

    def prepare_value(self, value) -> str:
        return "\n".join(value) if isinstance(value, list) else value


class RepositoryEditForm(EditForm):
    """A repository task version's editable content: the problem statement (``prompt``), the
    reference patch (``reference_solution``), the id lists, the test command and timeout. The
    workspace and hidden test files are kept."""

    prompt = _text(rows=12)
    reference_solution = _text(rows=18)
    fail_to_pass = TestIdsField(label="FAIL_TO_PASS (one pytest node id a line)")
    pass_to_pass = TestIdsField(label="PASS_TO_PASS (one pytest node id a line)")
    test_command = forms.CharField(max_length=500, help_text="pytest and its arguments")
    entry_point = visible_tests = hidden_tests = test_timeout_s = setup_code = None

    # What the service lets an edit change, but the environment (edited on its own page).
    CONTENT = tuple(name for name in REPOSITORY_EDITABLE if name != "environment")
    field_order = [*CONTENT, "change_note", "base"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["prompt"].label = "Problem statement"
        self.fields["reference_solution"].label = "Reference patch (unified diff)"

    @classmethod
    def initial_for(cls, version: TaskVersion) -> dict:
        suite = version.test_suite
        return {
            "prompt": version.prompt,
            "reference_solution": version.reference_solution,
            "fail_to_pass": list(suite.fail_to_pass),
            "pass_to_pass": list(suite.pass_to_pass),
            "test_command": suite.test_command,
            "timeout_s": suite.timeout_s,
            "base": version.number,
        }


def edit_form_class(version: TaskVersion) -> type[EditForm]:
    """The edit form for ``version``'s kind of task."""
    return RepositoryEditForm if version.is_repository else EditForm


class PinForm(forms.Form):
    """Pin the task versions matching a filter as task set ``name`` (created or re-pinned)."""

    name = forms.CharField(max_length=TaskSet._meta.get_field("name").max_length)
    description = forms.CharField(required=False, max_length=2000)
    change_note = forms.CharField(max_length=500)
    trainable_only = forms.BooleanField(
        required=False,
        initial=True,
        help_text="pin only validated versions that are not quarantined",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if not task_set_name_ok(name):
            raise forms.ValidationError(TASK_SET_NAME_RULE)
        return name


def first_error(form: forms.Form) -> tuple[str | None, str]:
    """The first error of an invalid form as ``(field or None, "field: message")``."""
    for name, errors in form.errors.items():
        field = None if name == "__all__" else name
        return field, f"{field}: {errors[0]}" if field else errors[0]
    return None, "invalid input"
