"""Environments made real: built once into a content-addressed store, mounted read-only.

* :mod:`.spec` checks a runtime and its pins and names the builds by hash;
* :mod:`.store` builds each hash once (lock, temp dir, manifest, atomic rename) and verifies it
  on a worker's first mount;
* :mod:`.packages` runs pip (``--target``) or npm (``ci``); :mod:`.debian` builds a second
  Python's root filesystem with mmdebstrap in a user namespace.

``build.materialise`` is the caller's side (validation, a build job, a benchmark): it builds what
an environment needs. A request then carries ``Materialised.request_field()``, and the worker
turns it into a ``Mount`` (``mount.mount_for``) that the sandbox's zygotes are started with.
"""
