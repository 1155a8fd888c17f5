"""Who may do what in the review pages.

Roles (groups made by migrations; an admin is a superuser and holds every permission):

* ``curators`` (tasks_library 0003): create review queues, assign items, review, submit task drafts;
* ``operators`` (console 0002): launch and cancel runs, create review queues and assign items;
* ``reviewers`` (console 0002): label the items assigned to them and write task drafts;
* ``viewers``: read. Every review page needs a signed-in user.
"""

from __future__ import annotations

from tasks_library.permissions import is_curator

OPERATORS = "operators"
REVIEWERS = "reviewers"


def _signed_in(user) -> bool:
    return bool(user is not None and user.is_authenticated)


def may_manage_queues(user) -> bool:
    """Create review queues and (re)assign their items: curators, operators, superusers."""
    return _signed_in(user) and (is_curator(user) or user.has_perm("console.add_reviewqueue"))


def may_review(user) -> bool:
    """May be assigned items and label them: reviewers, curators, superusers."""
    return _signed_in(user) and (is_curator(user) or user.has_perm("console.add_reviewlabel"))


def may_submit_drafts(user) -> bool:
    """Submit a task draft into the task library: curators (and superusers)."""
    return _signed_in(user) and is_curator(user)
