"""Live environments: probes, known errors, capture, restore, wheelhouse."""
