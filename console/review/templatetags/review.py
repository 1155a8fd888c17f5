"""``{% trajectory_review trajectory as review %}``: the review state of a trajectory for the
replay page's panel (``review/panel.html``), read by
:func:`console.review.selectors.trajectory_review`."""

from django import template

from console.review.models import LABELS
from console.review.selectors import trajectory_review as read

register = template.Library()


@register.simple_tag(takes_context=True)
def trajectory_review(context, trajectory) -> dict:
    """The panel's data; nothing is read for a signed-out visitor (review data needs a sign-in,
    and the public replay page keeps its query budget)."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"signed_out": True}
    return read(trajectory_id=trajectory.pk, user=user)


@register.filter
def label_title(label) -> str:
    """A review label's title in its queue's label set (a custom label's own title)."""
    item = getattr(label, "item", None)
    if item is not None:
        return item.queue.label_title(label.label)
    return dict(LABELS).get(label.label, label.label.replace("_", " "))
