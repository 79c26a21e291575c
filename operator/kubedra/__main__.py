"""``python -m kubedra`` runs the same command line as the ``kubedra`` script."""

from kubedra.cli import run

run()
