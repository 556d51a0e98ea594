"""Making and changing environments. Here so far: the interpreter a command acts
on (chosen from --venv, the bundle's captured.json, its .venv, $VIRTUAL_ENV or
envlock's own) and the stdlib probe run in it, which doctor, capture, restore,
smoke and notebook all use. Diagnosis of what the probe finds is envlock.doctor."""
