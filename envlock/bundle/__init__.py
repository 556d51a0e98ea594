"""The bundle folder: every file ``envlock lock`` writes into DIR, as one transaction.

``folder`` makes and writes the bundle (``envlock lock -o DIR``, ``envlock
render DIR``), ``manifest`` switches its files in all or nothing,
``guard`` refuses an output folder that would overwrite an input, and
``check`` is ``envlock lock --check DIR``. What goes into the files is
render's (envlock.render, which also holds ``envlock_runtime.py``, copied
verbatim into every bundle).
"""
