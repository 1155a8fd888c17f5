"""The spot-check review room: queues of sampled trajectories, assignments, labels, agreement
between reviewers, and what labels feed back into the task library and the hack corpus.

A Django app of its own (label ``review``): models, services (writes), selectors (reads),
sampling strategies, agreement statistics, forms, views, templates and the
``export_hack_corpus`` command. It reads training's trajectories and writes to the task library
through their services; the console's pages include its panel, never the other way round.
"""
