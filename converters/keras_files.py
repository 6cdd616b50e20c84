"""Keras model files read without Keras: the two containers and the layer chain.

A Keras model lives in one of two containers:

* ``.keras`` (Keras 3): a zip archive holding ``config.json`` (the
  architecture), ``metadata.json`` and ``model.weights.h5``. That HDF5 file
  stores variables by *object attribute path*: ``layers/<key>/vars/0..k-1`` in
  creation order, where ``<key>`` is the snake-case class name made unique in
  list order (``dense``, ``dense_1``, ...) and nested objects sit under their
  attribute names (``hidden_cell``, ``cell``, ``layer``). Each ``vars`` group
  carries the runtime layer name in its attribute ``name``.
* legacy ``.h5`` (``model.save("model.h5")``): the root attribute
  ``model_config`` holds the architecture as JSON and
  ``/model_weights/<layer name>`` the layer's variables, listed by the attribute
  ``weight_names`` as paths ``.../<owner>/<variable>`` (with a ``:0`` suffix in
  files written by Keras 2).

The container is recognised by its content, not its suffix. This module knows
containers and configs; :mod:`lmu_edge.converters.keras_lmu` knows the layers.
Nothing here imports TensorFlow or Keras.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from pathlib import Path
from typing import Optional

import h5py
import numpy as np

from lmu_edge import limits
from lmu_edge.errors import LmuEdgeError, ModelFormatError, ShapeError, UnsupportedLayerError

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_RESAVE = "re-save the model with model.save('model.keras') (or 'model.h5') in Keras"


def class_name(layer: dict) -> str:
    """The class of a serialized layer: ``"LMU"`` for both ``"LMU"`` and ``"keras-lmu>LMU"``."""
    return str(layer.get("class_name", "?")).split(">")[-1]


def layer_name(layer: dict) -> str:
    """The layer's name from its config (or its outer record); ``"?"`` when it has none."""
    cfg = layer.get("config")
    return str(cfg.get("name") if isinstance(cfg, dict) and "name" in cfg else layer.get("name", "?"))


def _snake(name: str) -> str:
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def _read(ds, where: str, shape=None, name: str = "") -> np.ndarray:
    """A weight dataset as an array: its dtype, declared size and (when given) ``shape`` checked from its
    header before anything is read or decompressed (links, virtual datasets and external storage were
    refused when the file was opened: :func:`check_h5`)."""
    if not isinstance(ds, h5py.Dataset):
        raise ModelFormatError(f"{where}: a weight is not an HDF5 dataset; re-save the model")
    at = f"{where}, dataset {ds.name!r}"
    _check_dataset(ds, at)
    if ds.dtype.kind not in "fiub":
        raise ModelFormatError(f"{at}: a weight has dtype {ds.dtype}, not numbers; re-save the model")
    if shape is not None and tuple(ds.shape) != tuple(shape):
        raise ShapeError(
            f"{at}: weight {name!r} has shape {tuple(ds.shape)}, but the config implies {tuple(shape)}; "
            f"the weights do not belong to this config; re-save the model"
        )
    return np.asarray(ds[()])


#: links and objects a weights file may hold (Keras writes a few hundred)
MAX_H5_OBJECTS = 100_000
#: soft links followed in a row
MAX_SOFT_HOPS = 16


def _check_dataset(ds, at: str) -> None:
    """Refuse a dataset whose data lives outside the file or whose declared size is over the limits,
    from its header alone."""
    if ds.is_virtual:
        raise ModelFormatError(f"{at}: a virtual dataset (its data lives in other files); re-save the model")
    if ds.external:
        raise ModelFormatError(f"{at}: a dataset stored in external raw files; re-save the model")
    dt = ds.dtype
    if dt.fields is not None:
        raise ModelFormatError(f"{at}: a compound dtype ({dt}), not numbers; re-save the model")
    if dt.subdtype is not None:
        raise ModelFormatError(f"{at}: an array dtype ({dt}), not numbers; re-save the model")
    n = int(np.prod(ds.shape, dtype=object)) if ds.shape is not None else 0
    if n > limits.MAX_MODEL_ELEMENTS:
        raise limits.LimitError(
            f"{at}: declares {ds.shape} = {n} elements, more than the limit {limits.MAX_MODEL_ELEMENTS}"
        )
    if n * dt.itemsize > 8 * limits.MAX_MODEL_ELEMENTS:
        raise limits.LimitError(
            f"{at}: declares {n * dt.itemsize} bytes ({n} x {dt.itemsize}), more than the limit "
            f"{8 * limits.MAX_MODEL_ELEMENTS}"
        )


def _resolve_soft(h5: h5py.File, path: str, where: str, at: str) -> None:
    """Follow the soft link to ``path`` component by component without opening anything through an
    external link: it must end at an object of this file."""
    hops = 0
    while True:
        node = h5["/"]
        parts = [p for p in path.split("/") if p]
        for i, part in enumerate(parts):
            if not isinstance(node, h5py.Group) or part not in node.keys():  # keys(): names, nothing resolved
                raise ModelFormatError(f"{where}: soft link {at!r} points to {path!r}, which is not in the file")
            link = node.get(part, getlink=True)
            if isinstance(link, h5py.SoftLink):
                hops += 1
                if hops > MAX_SOFT_HOPS:
                    raise ModelFormatError(f"{where}: soft link {at!r} starts a chain of more than {MAX_SOFT_HOPS}")
                rest = "/".join(parts[i + 1 :])
                base = link.path if link.path.startswith("/") else node.name.rstrip("/") + "/" + link.path
                path = base.rstrip("/") + ("/" + rest if rest else "")
                break
            if not isinstance(link, h5py.HardLink):
                kind = "an external link" if isinstance(link, h5py.ExternalLink) else "a link of an unknown kind"
                raise ModelFormatError(
                    f"{where}: soft link {at!r} leads through {kind} at {node.name.rstrip('/')}/{part}, "
                    f"out of the file; re-save the model"
                )
            node = node[part]
        else:
            return


def check_h5(h5: h5py.File, where: str) -> None:
    """Walk every link of an opened HDF5 file without following any out of it, before anything is read:
    external links, user-defined links, soft links that do not end inside the file, virtual datasets,
    datasets in external raw files, compound and array dtypes and datasets over the size limits are
    refused (:class:`ModelFormatError` / :class:`~lmu_edge.limits.LimitError` naming the path)."""
    seen: set = set()
    todo = [h5["/"]]
    count = 0
    while todo:
        g = todo.pop()
        for name in g.keys():
            count += 1
            if count > MAX_H5_OBJECTS:
                raise limits.LimitError(f"{where}: more than {MAX_H5_OBJECTS} links in the HDF5 file; refusing it")
            at = f"{g.name.rstrip('/')}/{name}"
            link = g.get(name, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                raise ModelFormatError(
                    f"{where}: {at!r} is an external link (to {link.filename[:80]!r}); lmu-edge reads "
                    f"only data inside the model file; re-save the model"
                )
            if isinstance(link, h5py.SoftLink):
                _resolve_soft(h5, link.path if link.path.startswith("/") else f"{g.name}/{link.path}", where, at)
                continue
            if not isinstance(link, h5py.HardLink):
                raise ModelFormatError(f"{where}: {at!r} is a link of an unknown kind; re-save the model")
            obj = g[name]
            if isinstance(obj, h5py.Dataset):
                _check_dataset(obj, f"{where}, dataset {at!r}")
            elif isinstance(obj, h5py.Group) and obj.id not in seen:
                seen.add(obj.id)
                todo.append(obj)


def _text(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


class KerasModelFile:
    """An opened ``.keras`` or ``.h5`` model: its config and its weights.

    Use as a context manager, or call :meth:`close`.

    Attributes
    ----------
    config : dict
        The serialized model, ``{"class_name": ..., "config": {...}}``.
    container : str
        ``"keras"`` (zip) or ``"h5"`` (legacy HDF5).
    keras_version : str or None
        The Keras version that wrote the file, when recorded.
    """

    def __init__(self, path, config: dict, container: str, h5: h5py.File, keras_version: Optional[str]):
        self.path, self.config, self.container, self._h5 = Path(path), config, container, h5
        self.keras_version = keras_version
        if not isinstance(config, dict) or not isinstance(config.get("config"), dict):
            raise ModelFormatError(f"{self.path}: the model config is not a serialized Keras model; {_RESAVE}")
        self._groups = self._top_groups() if container == "keras" else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Close the weights file."""
        self._h5.close()

    # --- the layer chain ------------------------------------------------------------------------

    def chain(self) -> tuple:
        """``(seq_len, features, layers)``: the input shape and the layers from input to output.

        Sequential models are chains by construction; a functional model must be
        one (one input, one output, every layer called once on one tensor).
        """
        cls, cfg = class_name(self.config), self.config["config"]
        layers = cfg.get("layers")
        if cls not in ("Sequential", "Functional", "Model") or not isinstance(layers, list):
            raise UnsupportedLayerError(
                f"{self.path}: model class {cls!r} is not supported; lmu-edge reads Sequential and "
                f"functional models (subclassed models keep no architecture in the file)"
            )
        if cls == "Sequential":
            chain = list(layers)
            shape = self._sequential_input(chain)
            chain = [layer for layer in chain if class_name(layer) != "InputLayer"]
        else:
            chain = _functional_chain(self.path, cfg)
            shape = _batch_shape(chain[0]["config"])
            chain = chain[1:]
        if shape is None or len(shape) != 3:
            raise UnsupportedLayerError(
                f"{self.path}: the model input has shape {shape}; lmu-edge converts models whose input is a "
                f"sequence (batch, time, features)"
            )
        T, F = shape[1], shape[2]
        if F is None:
            raise ModelFormatError(f"{self.path}: the number of input features is not recorded in the file; {_RESAVE}")
        return (None if T is None else int(T)), int(F), chain

    def _sequential_input(self, layers):
        for layer in layers[:1]:
            if class_name(layer) == "InputLayer" or _batch_shape(layer.get("config", {})) is not None:
                return _batch_shape(layer.get("config", {}))
        build = self.config.get("build_config") or {}
        return build.get("input_shape")

    # --- weights ------------------------------------------------------------------------------

    def _top_groups(self) -> dict:
        """Runtime layer name -> weights group of every top-level layer (``.keras``)."""
        if "layers" not in self._h5:
            raise ModelFormatError(
                f"{self.path}: model.weights.h5 has no 'layers' group, so it holds no model weights; {_RESAVE}"
            )
        top = self._h5["layers"]
        out = {}
        for key in top:
            g = top[key]
            if isinstance(g, h5py.Group) and "vars" in g and "name" in g["vars"].attrs:
                out[_text(g["vars"].attrs["name"])] = g
        # keys not labelled by name: snake(class) made unique in list order
        seq = class_name(self.config) == "Sequential"
        used: dict[str, int] = {}
        for layer in self.config["config"].get("layers", []):
            if seq and class_name(layer) == "InputLayer":
                continue
            key = _snake(class_name(layer))
            used[key] = used.get(key, -1) + 1
            key = key if used[key] == 0 else f"{key}_{used[key]}"
            if layer_name(layer) not in out and key in top:
                out[layer_name(layer)] = top[key]
        return out

    def weights(
        self, layer: dict, names: list, part: str = "own", hidden: Optional[str] = None, shapes: Optional[dict] = None
    ) -> dict:
        """The variables of one top-level layer: ``{name: array}`` for the names asked for.

        Parameters
        ----------
        layer : dict
            The serialized top-level layer.
        names : list of str
            The variable names expected, in creation order (``kernel``, ``bias``, ...).
        part : str
            ``"own"``: the layer's (or its inner cell's) variables; ``"hidden"``:
            those of its hidden cell, whose runtime name is ``hidden``.
        shapes : dict, optional
            ``{name: shape}`` the config implies: a weight of another shape is refused from its header,
            before it is read.
        """
        where = f"{self.path}: layer {layer_name(layer)!r} ({class_name(layer)})"
        if part == "hidden":
            where += f", hidden cell {hidden!r}"
        if self.container == "keras":
            arrays = self._keras_vars(layer, part, hidden, where, names, shapes or {})
            if len(arrays) != len(names):
                raise ModelFormatError(
                    f"{where}: the weights file holds {len(arrays)} variable(s) where the config implies "
                    f"{len(names)} ({', '.join(names) or 'none'}); the weights do not belong to this config; {_RESAVE}"
                )
            return dict(zip(names, arrays, strict=True))
        found = self._h5_vars(layer, part, hidden, where, shapes or {})
        if sorted(found) != sorted(names):
            raise ModelFormatError(
                f"{where}: the file holds variable(s) {', '.join(sorted(found)) or 'none'} where the config "
                f"implies {', '.join(names) or 'none'}; the weights do not belong to this config; {_RESAVE}"
            )
        return found

    def _keras_vars(self, layer, part, hidden, where, names, shapes) -> list:
        assert self._groups is not None, "only .keras files are read by variable path"
        g = self._groups.get(layer_name(layer))
        if g is None:
            raise ModelFormatError(f"{where}: model.weights.h5 holds no weights for this layer; {_RESAVE}")
        cls = class_name(layer)
        by_class: dict[str, list[tuple[str, ...]]]
        if part == "hidden":
            by_class = {
                "LMU": [("hidden_cell",), ("layer", "cell", "hidden_cell"), ("layer", "hidden_cell")],
                "RNN": [("cell", "hidden_cell")],
            }
            paths = by_class.get(cls, [("hidden_cell",)])
        else:
            by_class = {"LMU": [("layer", "cell"), ("layer",)], "RNN": [("cell",)], "TimeDistributed": [("layer",)]}
            paths = by_class.get(cls, [()])
        groups = []
        for p in paths:
            sub = g
            for s in p:
                sub = sub[s] if isinstance(sub, h5py.Group) and s in sub else None
            if isinstance(sub, h5py.Group) and "vars" in sub:
                groups.append(sub["vars"])
        if part == "hidden":  # a shared object is stored at its first path only: prefer the labelled one
            groups.sort(key=lambda v: _text(v.attrs.get("name", "")) != hidden)
        if not groups:
            raise ModelFormatError(
                f"{where}: model.weights.h5 has no variables group for this "
                f"{'hidden cell' if part == 'hidden' else 'layer'}; {_RESAVE}"
            )
        v = groups[0]
        try:
            named = len(v) == len(names)  # else refused by the caller, naming the counts
            return [
                _read(v[str(i)], where, *((shapes.get(names[i]), names[i]) if named else ())) for i in range(len(v))
            ]
        except KeyError:
            raise ModelFormatError(
                f"{where}: the variables in model.weights.h5 are not numbered 0..{len(v) - 1}; {_RESAVE}"
            ) from None

    def _h5_vars(self, layer, part, hidden, where, shapes) -> dict:
        mw = self._h5["model_weights"]
        name = layer_name(layer)
        if name not in mw:
            raise ModelFormatError(f"{where}: the file has no group /model_weights/{name}; {_RESAVE}")
        g = mw[name]
        out = {}
        for wn in g.attrs.get("weight_names", []):
            wn = _text(wn)
            parts = wn.split(":")[0].split("/")
            mine = (len(parts) > 1 and parts[-2] == hidden) == (part == "hidden")
            if not mine:
                continue
            if parts[-1] in out:
                raise ModelFormatError(f"{where}: the file holds two variables called {parts[-1]!r}; {_RESAVE}")
            if wn not in g:
                raise ModelFormatError(f"{where}: variable {wn!r} is listed but missing from the file; {_RESAVE}")
            out[parts[-1]] = _read(g[wn], where, shapes.get(parts[-1]), parts[-1])
        return out


def _batch_shape(cfg: dict):
    for key in ("batch_shape", "batch_input_shape"):
        if isinstance(cfg, dict) and cfg.get(key) is not None:
            return list(cfg[key])
    return None


# --- functional models ------------------------------------------------------------------------


def _tensor_refs(obj) -> list:
    """Names of the layers whose outputs a node argument refers to (Keras 3 and Keras 2 formats)."""
    if isinstance(obj, dict):
        if obj.get("class_name") == "__keras_tensor__":
            return [str(obj["config"]["keras_history"][0])]
        return [r for v in obj.values() for r in _tensor_refs(v)]
    if isinstance(obj, (list, tuple)):
        if len(obj) >= 3 and isinstance(obj[0], str) and isinstance(obj[1], int):  # Keras 2: [name, node, idx, kw]
            return [obj[0]]
        return [r for v in obj for r in _tensor_refs(v)]
    return []


def _endpoints(value) -> list:
    """``["name", 0, 0]`` or ``[["name", 0, 0], ...]`` -> layer names."""
    if isinstance(value, list) and value and isinstance(value[0], str):
        return [value[0]]
    return [v[0] for v in value or []]


def _functional_chain(path, cfg: dict) -> list:
    """The layers of a functional model from its InputLayer to its output, or a clear error."""
    layers = {}
    for layer in cfg["layers"]:
        layers[str(layer.get("name", layer_name(layer)))] = layer
    ins, outs = _endpoints(cfg.get("input_layers")), _endpoints(cfg.get("output_layers"))
    if len(ins) != 1 or len(outs) != 1:
        raise UnsupportedLayerError(
            f"{path}: the model has {len(ins)} input(s) and {len(outs)} output(s); lmu-edge converts "
            f"single-input, single-output chains of layers"
        )
    producer: dict[str, str] = {}
    consumers: dict[str, list[str]] = {}
    for name, layer in layers.items():
        nodes = layer.get("inbound_nodes") or []
        if class_name(layer) == "InputLayer":
            continue
        if len(nodes) != 1:
            raise UnsupportedLayerError(
                f"{path}: layer {name!r} ({class_name(layer)}) is called {len(nodes)} times; lmu-edge converts "
                f"chains in which every layer is called once"
            )
        refs = _tensor_refs(nodes[0])
        if len(refs) != 1:
            raise UnsupportedLayerError(
                f"{path}: layer {name!r} ({class_name(layer)}) takes {len(refs)} inputs; lmu-edge converts "
                f"single-input chains of layers (no branches or merges)"
            )
        producer[name] = refs[0]
        consumers.setdefault(refs[0], []).append(name)
    for name, users in consumers.items():
        if len(users) > 1:
            raise UnsupportedLayerError(
                f"{path}: the output of layer {name!r} feeds {len(users)} layers ({', '.join(users)}); "
                f"lmu-edge converts single chains of layers (no branches)"
            )
    chain, cur = [], outs[0]
    while True:
        if cur not in layers:
            raise ModelFormatError(f"{path}: the config refers to a layer {cur!r} it does not define; {_RESAVE}")
        chain.append(layers[cur])
        if cur == ins[0]:
            break
        if cur not in producer or len(chain) > len(layers):
            raise UnsupportedLayerError(f"{path}: layer {cur!r} is not connected to the input {ins[0]!r}")
        cur = producer[cur]
    if class_name(chain[-1]) != "InputLayer":
        raise UnsupportedLayerError(f"{path}: the model input {ins[0]!r} is not an InputLayer")
    unused = sorted(set(layers) - {str(layer.get("name", layer_name(layer))) for layer in chain})
    if unused:
        raise UnsupportedLayerError(
            f"{path}: layer(s) {', '.join(map(repr, unused))} are not on the path from "
            f"input to output; lmu-edge converts single chains of layers"
        )
    return chain[::-1]


# --- opening --------------------------------------------------------------------------------


def open_model(path) -> KerasModelFile:
    """Open a ``.keras`` or ``.h5`` Keras model file (recognised by content), or raise
    :class:`~lmu_edge.errors.ModelFormatError` saying what is wrong with it."""
    p = limits.check_regular_file(path, "model file")
    try:
        with p.open("rb") as f:
            head = f.read(8)
    except OSError as e:
        raise ModelFormatError(f"{p}: cannot be read ({e.strerror or e})") from None
    if head.startswith(b"PK"):
        return _open_zip(p)
    if head == _HDF5_SIGNATURE or h5py.is_hdf5(str(p)):
        return _open_h5(p)
    what = "is empty" if not head else f"starts with bytes {head[:4]!r}"
    raise ModelFormatError(
        f"{p}: not a Keras model file (a .keras file is a zip archive and a .h5 file an "
        f"HDF5 file; this one {what}); {_RESAVE}"
    )


def _json(data: bytes, where: str) -> dict:
    try:
        out = limits.load_json(data, where)
    except (UnicodeDecodeError, ValueError) as e:
        if isinstance(e, LmuEdgeError):
            raise
        raise ModelFormatError(f"{where} is not valid JSON ({e}); {_RESAVE}") from None
    if not isinstance(out, dict):
        raise ModelFormatError(f"{where} is not a JSON object; {_RESAVE}")
    return out


def _open_zip(p: Path) -> KerasModelFile:
    try:
        with zipfile.ZipFile(p) as z:
            limits.check_zip(z, str(p))
            names = set(z.namelist())
            missing = [n for n in ("config.json", "model.weights.h5") if n not in names]
            if missing:
                extra = (
                    " (sharded weights, model.weights.json, are not supported)" if "model.weights.json" in names else ""
                )
                raise ModelFormatError(
                    f"{p}: the .keras archive has no {' and no '.join(missing)}{extra}; it is not a complete "
                    f"Keras 3 model file; {_RESAVE}"
                )
            config = _json(z.read("config.json"), f"{p}: config.json")
            weights = z.read("model.weights.h5")
            meta = _json(z.read("metadata.json"), f"{p}: metadata.json") if "metadata.json" in names else {}
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError, RuntimeError, OSError) as e:
        if isinstance(e, LmuEdgeError):
            raise
        raise ModelFormatError(f"{p}: damaged or truncated zip archive ({e}); {_RESAVE}") from None
    try:
        h5 = h5py.File(io.BytesIO(weights), "r")
    except (OSError, RuntimeError, ValueError) as e:
        raise ModelFormatError(
            f"{p}: model.weights.h5 inside the archive is not a readable HDF5 file ({e}); {_RESAVE}"
        ) from None
    try:
        check_h5(h5, f"{p}: model.weights.h5")
    except BaseException:
        h5.close()
        raise
    return KerasModelFile(p, config, "keras", h5, meta.get("keras_version"))


def _read_whole(p: Path) -> bytes:
    """The file's bytes, read by Python within the archive size limit: a read that blocks (a hung mount) is
    interrupted by SIGTERM / Ctrl-C, as HDF5's own C reads are not, and HDF5 then parses memory only."""
    with p.open("rb") as f:
        data = f.read(limits.MAX_ZIP_BYTES + 1)
    if len(data) > limits.MAX_ZIP_BYTES:
        raise limits.LimitError(
            f"{p}: an HDF5 model file over {limits.MAX_ZIP_BYTES >> 20} MiB (MAX_ZIP_BYTES, the limit on a .keras "
            f"archive's contents), larger than any supported model"
        )
    return data


def _open_h5(p: Path) -> KerasModelFile:
    try:
        data = _read_whole(p)
    except OSError as e:
        raise ModelFormatError(f"{p}: cannot be read ({e.strerror or e})") from None
    try:
        h5 = h5py.File(io.BytesIO(data), "r")
    except (OSError, RuntimeError, ValueError) as e:
        raise ModelFormatError(f"{p}: damaged or truncated HDF5 file ({e}); {_RESAVE}") from None
    try:
        check_h5(h5, str(p))
        if "model_config" not in h5.attrs:
            hint = (
                " it holds weights only (saved with save_weights)"
                if "layer_names" in h5.attrs or "layers" in h5
                else " it is not a model saved by Keras"
            )
            raise ModelFormatError(
                f"{p}: HDF5 file without a 'model_config' attribute:{hint}; save the whole "
                f"model with model.save('model.keras') or model.save('model.h5')"
            )
        if "model_weights" not in h5:
            raise ModelFormatError(f"{p}: HDF5 file with a model config but no /model_weights group; {_RESAVE}")
        config = _json(h5.attrs["model_config"], f"{p}: attribute model_config")
        version = h5.attrs.get("keras_version")
    except BaseException:
        h5.close()
        raise
    return KerasModelFile(p, config, "h5", h5, None if version is None else _text(version))
