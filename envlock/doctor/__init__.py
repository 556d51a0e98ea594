"""Doctor: probes of a live venv and known errors as data (capture, restore and
wheelhouse live here too)."""
