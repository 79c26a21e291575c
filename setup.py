"""Build hook: generate the gRPC stubs of the kubelet plugin API before packaging.

``operator/kubedra/node/proto/*.proto`` are compiled with grpcio-tools (a build requirement in
pyproject.toml) into ``*_pb2.py``, ``*_pb2.pyi`` and ``*_pb2_grpc.py`` next to them, on every
build: ``pip install .``, ``pip install -e .`` (setuptools runs ``build_py`` in editable mode
too) and wheel/sdist builds. The generated files are not committed (see .gitignore).
Everything else about the package is declared in pyproject.toml.
"""

from __future__ import annotations

from grpc_tools.command import build_package_protos
from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithProtos(build_py):
    """``build_py`` that first compiles every ``.proto`` under ``operator/`` in place."""

    def run(self) -> None:
        build_package_protos("operator", strict_mode=True)
        super().run()


setup(cmdclass={"build_py": BuildPyWithProtos})
