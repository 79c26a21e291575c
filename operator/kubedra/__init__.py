"""kubedra: a Kubernetes operator that manages specialised hardware through DRA."""

__version__ = "0.1.0"
