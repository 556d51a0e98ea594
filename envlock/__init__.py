"""envlock: reproducible GPU TensorFlow environments."""

__version__ = "0.1.0"
