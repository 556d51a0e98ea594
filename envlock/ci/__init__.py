"""CI matrix image builds: cells, a bundle per cell, images, reports, workflows."""
