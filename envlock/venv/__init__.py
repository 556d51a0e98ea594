"""Making and changing environments: capture a working environment into a lock,
restore a bundle into a new venv (a link switched over versioned folders) or
sync it into a given interpreter in place with an undo store, the hashed install
both share, Jupyter kernels, the wheelhouse restore installs from offline, and
the interpreter a command acts on with the stdlib probe run in it. Diagnosis of
what the probe finds (findings, known errors) is envlock.doctor."""
