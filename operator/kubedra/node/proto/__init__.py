"""kubedra's kubelet plugin API (``*.proto``) and the stubs the build generates from it.

``dra_v1`` / ``dra_v1beta1``: the DRAPlugin service; ``pluginregistration_v1``: the plugin
registration service. Generated modules: ``<name>_pb2`` (messages) and ``<name>_pb2_grpc``
(servicers and stubs); see setup.py.
"""
