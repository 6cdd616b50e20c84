"""Converters: one module per source format (installed as ``lmu_edge.converters``).

A converter module defines ``load(path) -> lmu_edge.ir.Graph`` and reads its
files without the framework that wrote them. Register it by file suffix in
:data:`lmu_edge.registry.CONVERTERS`.
"""
