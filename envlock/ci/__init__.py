"""CI matrix image builds: cells, bundles per cell, images, workflows (ci matrix, lock, init, build)."""
