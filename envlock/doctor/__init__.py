"""Live environments: probes of a venv and known errors as data (doctor),
capture, restore and the wheelhouse."""
