"""Drive a TFLite step model one sample at a time (numpy only, no lmu_edge import).

This file is also run on its own, as the worker of the ``tflite-runtime``
runtime, by a Python that has the legacy ``tflite-runtime`` package (numpy < 2,
and no TensorFlow imported in the same process)::

    python _tflite_session.py MODEL_DIR     # commands on stdin, answers on stdout (.npy frames)

``io.json`` (written by the target) names the step model's inputs and outputs
in the order of subgraph 0 (what TFLite Micro, which has no signatures, sees)
and says whether the state is external (inputs ``<name>``, outputs
``<name>_out``) or internal (resource variables, a ``step_reset`` signature).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np

_INT = {"int8": np.int8, "int16": np.int16, "int32": np.int32}


def _quant(v, d):
    dt = np.dtype(d["dtype"])
    if dt.kind == "f":
        return np.asarray(v, dtype=dt)
    s, z = d["scale"], d["zero_point"]
    info = np.iinfo(dt)
    return np.clip(np.round(np.asarray(v, dtype=np.float64) / s) + z, info.min, info.max).astype(dt)


def _dequant(v, d):
    if np.dtype(d["dtype"]).kind == "f":
        return np.asarray(v, dtype=np.float64)
    return (np.asarray(v, dtype=np.float64) - d["zero_point"]) * d["scale"]


class Session:
    """``reset()``, ``step(x_t (F,)) -> y_t`` over a backend's ``invoke(dict) -> dict``.

    External state stays in the integer (or float) representation the model
    uses: it is handed back unchanged, as a device would.
    """

    def __init__(self, io: dict, backend):
        self.io, self.backend = io, backend
        self.inputs = {d["name"]: d for d in io["inputs"]}
        self.outputs = {d["name"]: d for d in io["outputs"]}
        self.states = [n for n in io["states"]]
        self.reset()

    def reset(self):
        """Back to the zero state (internal state: the model's ``step_reset`` signature)."""
        if self.io["variant"] == "internal":
            self.backend.reset()
            self.state = None
        else:
            self.state = {n: _quant(np.zeros(self.inputs[n]["shape"]), self.inputs[n]) for n in self.states}

    def step(self, x_t):
        """One step: float ``x_t`` (F,) in, float ``y_t`` out; the state advances."""
        x = _quant(np.asarray(x_t, dtype=np.float64).reshape(self.inputs["x"]["shape"]), self.inputs["x"])
        return _dequant(self.advance(x), self.outputs["y"])[0]

    def advance(self, x):
        """One step on the model's own ``x`` (quantized, in its shape); returns its own ``y``."""
        feed = {"x": x}
        if self.state is not None:
            feed.update(self.state)
        out = self.backend.invoke(feed)
        if self.state is not None:
            self.state = {n: np.array(out[f"{n}_out"]) for n in self.states}
        return out["y"]


def step_key(signatures) -> str:
    """The step signature: ``step``, or the only one (a single function converts as ``serving_default``)."""
    return "step" if "step" in signatures else next(iter(signatures))


class SignatureBackend:
    """LiteRT / tflite-runtime: the ``step`` (and ``reset``) signatures."""

    def __init__(self, interpreter_cls, model_path):
        self.interp = interpreter_cls(model_path=str(model_path))
        self.sigs = self.interp.get_signature_list()
        self.run_step = self.interp.get_signature_runner(step_key(self.sigs))
        self.run_reset = self.interp.get_signature_runner("step_reset") if "step_reset" in self.sigs else None

    def invoke(self, feed):
        """Run the ``step`` signature on ``feed`` (name -> array); returns its outputs by name."""
        return self.run_step(**feed)

    def reset(self):
        """Run the ``step_reset`` signature (zeroes the model's resource variables)."""
        assert self.run_reset is not None, "internal-state models always carry a step_reset signature"
        self.run_reset()


class MicroBackend:
    """TFLite Micro (``tflite-micro``'s host interpreter): subgraph 0 by input/output index."""

    def __init__(self, runtime_module, model_bytes, io, arena_size=None, grow=False):
        while True:
            try:
                self.interp = runtime_module.Interpreter.from_bytes(model_bytes, arena_size=arena_size)
                break
            except RuntimeError:  # "failed to allocate tensors": retry with a larger arena
                if not grow or arena_size > 1 << 28:
                    raise
                arena_size *= 2
        self.arena_size = arena_size
        self.in_names = [d["name"] for d in io["inputs"]]
        self.out_names = [d["name"] for d in io["outputs"]]

    def invoke(self, feed):
        """Set the inputs of ``feed`` (name -> array) by index, invoke, return the outputs by name."""
        for k, n in enumerate(self.in_names):
            self.interp.set_input(feed[n], k)
        self.interp.invoke()
        return {n: self.interp.get_output(k) for k, n in enumerate(self.out_names)}

    def reset(self):
        """Reset the interpreter's variables to their initial values."""
        self.interp.reset()


def run_sequences(session: Session, x: np.ndarray) -> np.ndarray:
    """``(N, T, F) -> (N, T, F_out)``, each sequence from a reset state: :meth:`Session.step`'s element-wise
    quantization of ``x`` and dequantization of ``y`` done once over all steps (a third of the time)."""
    shape, out = session.inputs["x"]["shape"], []
    for seq in _quant(np.asarray(x, dtype=np.float64), session.inputs["x"]):
        session.reset()
        out.append(np.stack([session.advance(x_t.reshape(shape)) for x_t in seq]))
    return _dequant(np.stack(out), session.outputs["y"])[:, :, 0]


# --- worker for the tflite-runtime runtime -----------------------------------------------------


def write_npy(stream, arr) -> None:
    """One ``.npy`` frame on a pipe (serialized first: ``tofile`` would bypass the stream's buffer)."""
    b = io.BytesIO()
    np.lib.format.write_array(b, np.asarray(arr, dtype=np.float64), allow_pickle=False)
    stream.write(b.getvalue())
    stream.flush()


class PipeReader:
    """A ``read``-only view of a pipe: numpy's ``.npy`` reader would otherwise seek or ``fromfile`` it."""

    def __init__(self, stream):
        self.stream = stream

    def read(self, n=-1):
        """Up to ``n`` bytes (all that is left when ``n`` is -1)."""
        return self.stream.read(n)


def _worker(model_dir):
    from tflite_runtime.interpreter import Interpreter

    d = Path(model_dir)
    io = json.loads((d / "io.json").read_text())
    session = Session(io, SignatureBackend(Interpreter, d / io["model"]))
    rd, wr = PipeReader(sys.stdin.buffer), sys.stdout.buffer
    while True:
        try:
            cmd = np.lib.format.read_array(rd, allow_pickle=False)  # np.load seeks: not on a pipe
        except (EOFError, ValueError):
            return
        if cmd.ndim == 0:  # reset
            session.reset()
            res = np.zeros(0)
        elif cmd.ndim == 1:  # one step
            res = session.step(cmd)
        else:  # whole sequences (N, T, F)
            res = run_sequences(session, cmd)
        write_npy(wr, res)


if __name__ == "__main__":
    _worker(sys.argv[1])
