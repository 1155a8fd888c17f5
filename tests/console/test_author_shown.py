"""Who made something is written "by <name>", escaped, or "author not recorded" where nobody was
recorded: never "by ?" (an environment's page once said so)."""

from django.template import Context, Template


def test_by_author():
    template = Template("{{ name|by_author }}")
    assert template.render(Context({"name": "cora"})) == "by cora"
    assert template.render(Context({"name": "<b>x</b>"})) == "by &lt;b&gt;x&lt;/b&gt;"
    for missing in ("", None):
        shown = template.render(Context({"name": missing}))
        assert "author not recorded" in shown and "?" not in shown.split(">")[-2]
