"""Environment pages: the list (with a create form for curators) and one environment version's
page: its build (status, what was installed, sizes, seconds, the log, live while it builds), the
task versions using it, and for curators a build button and an edit form (a new version,
optionally moving its tasks there and re-validating them)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from core.access import console_read_page
from core.errors import InputError, form_add_error
from core.permissions import is_curator
from tasks_library.environments import environment_create, environment_move
from tasks_library.environments_api import environments_with_usage
from tasks_library.models import TaskVersion
from tasks_library.tasks import environment_build_start, validation_job_start


class EnvironmentForm(forms.Form):
    name = forms.CharField(max_length=100)
    runtime = forms.CharField(max_length=40, help_text="python3.11, python3.13 or nodeN")
    packages = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 5, "cols": 60}),
        help_text="one pinned requirement a line: numpy==2.4.6 (Node.js: name@1.2.3)",
    )
    image = forms.CharField(max_length=300, required=False)
    source_builds = forms.BooleanField(
        required=False,
        label="allow source builds",
        help_text="packages without a wheel are built from their sdists in a build sandbox "
        "(network: the package registry only); off: wheels only, nothing of a package runs",
    )
    debian_packages = forms.CharField(
        required=False,
        label="Debian packages",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="python3.13 only: Debian packages installed into its root, separated by spaces "
        "or lines (nginx-light sqlite3); built in a user namespace from Debian's signed archive",
    )
    change_note = forms.CharField(max_length=500, required=False)
    move = forms.BooleanField(
        required=False,
        label="move its tasks here and re-validate them",
        help_text="every task whose newest version uses the old environment gets a new version",
    )

    def package_list(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["packages"].splitlines() if line.strip()]

    def debian_list(self) -> list[str]:
        return self.cleaned_data["debian_packages"].split()


def _require_curator(request: HttpRequest) -> None:
    if not is_curator(request.user):
        raise PermissionDenied("only curators may change environments")


@login_required
@console_read_page
def environment_list(request: HttpRequest) -> HttpResponse:
    """GET: every environment version. POST (curators): create one."""
    form = EnvironmentForm(initial={"runtime": "python3.11"})
    if request.method == "POST":
        _require_curator(request)
        form = EnvironmentForm(request.POST)
        if form.is_valid():
            try:
                env = environment_create(
                    name=form.cleaned_data["name"],
                    runtime=form.cleaned_data["runtime"],
                    packages=form.package_list(),
                    image=form.cleaned_data["image"],
                    source_builds=form.cleaned_data["source_builds"],
                    debian_packages=form.debian_list(),
                    change_note=form.cleaned_data["change_note"],
                    author=request.user.get_username(),
                )
            except InputError as exc:
                form_add_error(form, exc)
            else:
                messages.success(request, f"environment {env} created; build it here")
                return redirect("environment-detail", environment_id=env.pk)
    return render(
        request,
        "tasks_library/environment_list.html",
        {
            "environments": environments_with_usage(),
            "form": form,
            "curator": is_curator(request.user),
        },
    )


@login_required
@console_read_page
def environment_detail(request: HttpRequest, environment_id: int) -> HttpResponse:
    """GET: one environment version. POST (curators): ``action=build``, or ``action=edit`` with
    the form's fields."""
    env = get_object_or_404(environments_with_usage(), pk=environment_id)
    form = EnvironmentForm(
        initial={
            "name": env.name,
            "runtime": env.runtime,
            "packages": "\n".join(env.packages),
            "image": env.image,
            "source_builds": env.source_builds,
            "debian_packages": " ".join(env.debian_packages or []),
        }
    )
    if request.method == "POST":
        _require_curator(request)
        if request.POST.get("action") == "build":
            env = environment_build_start(environment=env)
            if env.build_error:
                messages.error(request, env.build_error)
            return redirect("environment-detail", environment_id=env.pk)
        form = EnvironmentForm(request.POST)
        if form.is_valid():
            author = request.user.get_username()
            try:
                new = environment_create(
                    name=form.cleaned_data["name"],
                    runtime=form.cleaned_data["runtime"],
                    packages=form.package_list(),
                    image=form.cleaned_data["image"],
                    source_builds=form.cleaned_data["source_builds"],
                    debian_packages=form.debian_list(),
                    change_note=form.cleaned_data["change_note"],
                    author=author,
                    parent=env,
                )
                moved = (
                    environment_move(
                        old=env,
                        new=new,
                        author=author,
                        change_note=form.cleaned_data["change_note"],
                    )
                    if form.cleaned_data["move"]
                    else []
                )
            except InputError as exc:
                form_add_error(form, exc)
            else:
                if moved:
                    job = validation_job_start(
                        version_ids=[v.pk for v in moved], options={}, author=author
                    )
                    messages.success(
                        request,
                        f"{len(moved)} task(s) moved to {new}; validation job {job.pk} runs them",
                    )
                else:
                    messages.success(request, f"new environment version {new}")
                return redirect("environment-detail", environment_id=new.pk)
    used_by = (
        TaskVersion.objects.filter(environment=env)
        .select_related("task")
        .order_by("task__sort_key", "number")
    )
    return render(
        request,
        "tasks_library/environment_detail.html",
        {
            "env": env,
            "used_by": used_by,
            "form": form,
            "curator": is_curator(request.user),
            "api_url": reverse("api-environment", args=[env.pk]),
            "children": env.children.order_by("-created_at"),
        },
    )
