"""One module (or package: ``ci/``, ``report/``) per sub-command; ``envlock.parser``
discovers them. ``options`` declares the flags several commands share;
``capture_freeze`` holds part of ``capture -r`` (no sub-command of its own)."""

NOT_COMMANDS = frozenset({"options", "capture_freeze"})
