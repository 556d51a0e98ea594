"""Live environments: probes, known errors, capture, restore and the wheelhouse."""
