"""One module (or package: ``ci/``, ``report/``) per sub-command; ``envlock.parser``
discovers them. ``options`` declares the flags several commands share."""

NOT_COMMANDS = frozenset({"options"})
