"""The API keys page: a signed-in user's personal API keys, a form to make one (the key is shown
once, on the answer to that POST) and a revoke button per key (:mod:`console.apikeys`)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from console.apikeys import DEFAULT_DAYS, MAX_DAYS, api_key_create, api_key_revoke, scopes_for
from console.models import ApiKey
from core.errors import InputError, form_add_error


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="what the key is for, e.g. 'nightly eval'")
    scope = forms.ChoiceField(help_text="read only, or the writes of one of your roles")
    days = forms.IntegerField(
        min_value=1, max_value=MAX_DAYS, initial=DEFAULT_DAYS, help_text="the key expires then"
    )

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        labels = dict(ApiKey.SCOPES)
        self.fields["scope"].choices = [(s, labels[s]) for s in scopes_for(user)]


@never_cache  # the answer to a POST holds a key in clear: no cache may keep it
@login_required
@require_http_methods(["GET", "POST"])
def api_keys(request: HttpRequest) -> HttpResponse:
    """``GET``: the user's keys and the form. ``POST``: make a key and show it once."""
    form = ApiKeyForm(request.POST if request.method == "POST" else None, user=request.user)
    new_key = None
    if request.method == "POST" and form.is_valid():
        try:
            record, new_key = api_key_create(user=request.user, **form.cleaned_data)
        except InputError as exc:
            form_add_error(form, exc)
        else:
            form = ApiKeyForm(user=request.user)
            messages.success(request, f"API key {record.name!r} made: copy it now")
    keys = ApiKey.objects.filter(user=request.user)
    return render(
        request,
        "console/api_keys.html",
        {"form": form, "keys": keys, "new_key": new_key},
        status=400 if request.method == "POST" and new_key is None else 200,
    )


@login_required
@require_POST
def api_key_revoke_view(request: HttpRequest, key_id: int) -> HttpResponse:
    """Revoke one of the user's keys, then back to the list."""
    try:
        record = api_key_revoke(user=request.user, key_id=key_id)
    except InputError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"API key {record.name!r} (crk_{record.key_id}) revoked")
    return redirect("api-keys")
