"""Diagnosis of a live environment: the probe of a venv judged against its lock
and host (findings), the fixes they hold (advice), and known errors as data.
Making and changing environments (capture, restore, the wheelhouse) is envlock.venv."""
