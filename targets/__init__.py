"""Targets: one module per runtime family (installed as ``lmu_edge.targets``).

A target module defines ``QUANTIZE`` (the quantization modes it emits),
``RUNTIMES`` and ``DEFAULT_RUNTIME``, ``OPTIONS`` (its options and their
defaults), ``emit(graph, out_dir, options) -> dict`` (writes its files and
returns manifest entries), ``run(artifact, x, runtime)`` and
``stream(artifact, runtime)``. Register it in :data:`lmu_edge.registry.TARGETS`.
"""
