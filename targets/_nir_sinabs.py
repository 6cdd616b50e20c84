"""The ``sinabs`` runtime of the nir target, run as a script by a separate Python.

Sinabs 3.1.3 pins ``nir <= 1.0.4`` (lmu-edge writes with NIR 1.0.8), so it lives in its own virtual
environment (``scripts/sinabs_venv.sh``) and this file imports nothing from lmu_edge: only numpy,
nir, torch and sinabs. Usage: ``python _nir_sinabs.py MODEL.nir STEPS_PER_SAMPLE``, then ``.npy``
arrays over stdin/stdout: a 0-d array resets the state, a 1-d array is one input sample (the answer
is the output after it), a 3-d array ``(N, T, F)`` is whole sequences (answer ``(N, T, outputs)``).

Sinabs imports ``nir.LI`` as ``ExpLeakSqueeze`` with ``norm_input=False``: per step of one time unit,
``v <- exp(-1/tau) v + I`` (NIR's LI would add ``(1 - exp(-1/tau)) r I``), and it requires ``r = 1``
and ``v_leak = 0``; it has no case for ``nir.Linear`` (skips it silently), which is why the file
writes every weight as ``nir.Affine``. :func:`rewrite` gives the LI ``tau = steps_per_sample``
steps and multiplies every weight into it by ``1 - exp(-1/steps_per_sample)``: the simulator's step
is then ``v <- e^-h v + (1 - e^-h) I`` with ``h = 1 / steps_per_sample`` of a sample, the
exponential-Euler step of the graph's ``dv/dt = -v + I`` (first order in ``h``).
"""

from __future__ import annotations

import io
import os
import sys

import numpy as np


def rewrite(g, k: int):
    """``g`` with each LI's time constant in simulator steps (``k`` per sample) and its inputs scaled."""
    import nir

    c = 1.0 - np.exp(-1.0 / k)
    nodes = dict(g.nodes)
    for key, node in g.nodes.items():
        if isinstance(node, nir.LI):
            nodes[key] = nir.LI(tau=np.asarray(node.tau) * k, r=node.r, v_leak=node.v_leak)
            for src, dst in g.edges:
                if dst == key:
                    w = g.nodes[src]
                    b = getattr(w, "bias", None)
                    b = np.zeros(np.shape(w.weight)[0]) if b is None else np.asarray(b)
                    nodes[src] = nir.Affine(weight=np.asarray(w.weight) * c, bias=b * c)
    return nir.NIRGraph(nodes=nodes, edges=list(g.edges))


class Session:
    """One sequence at a time through Sinabs' module, ``k`` simulator steps per sample."""

    def __init__(self, path: str, k: int):
        import nir
        from sinabs.nir import from_nir

        self.g, self.k, self.from_nir = rewrite(nir.read(path), k), int(k), from_nir
        self.reset()

    def reset(self) -> None:
        """A fresh module (Sinabs layers keep their state in buffers)."""
        self.net = self.from_nir(self.g, batch_size=1)
        self.state = None

    def step(self, x_t) -> np.ndarray:
        """The output after one input sample held for ``k`` steps."""
        import torch

        x = torch.tensor(np.asarray(x_t, np.float32).reshape(1, -1))
        with torch.no_grad():
            for _ in range(self.k):
                y, self.state = self.net(x) if self.state is None else self.net(x, self.state)
        return y.numpy().astype(np.float64).reshape(-1)


class Pipe:
    """A ``read``-only view of a pipe (numpy's reader would otherwise ``fromfile`` it)."""

    def __init__(self, stream):
        self.read = stream.read


def write_npy(stream, arr) -> None:
    """One ``.npy`` frame on a pipe (serialized first: ``tofile`` would bypass the stream's buffer)."""
    b = io.BytesIO()
    np.lib.format.write_array(b, np.asarray(arr, dtype=np.float64), allow_pickle=False)
    stream.write(b.getvalue())
    stream.flush()


def main(path: str, k: str) -> None:
    """Serve ``.npy`` requests on stdin (see the module docstring)."""
    s = Session(path, int(k))
    rd, wr = Pipe(sys.stdin.buffer), sys.stdout.buffer
    while True:
        try:
            cmd = np.lib.format.read_array(rd, allow_pickle=False)
        except (EOFError, ValueError):
            return
        if cmd.ndim == 0:
            s.reset()
            res = np.zeros(0)
        elif cmd.ndim == 1:
            res = s.step(cmd)
        else:
            ys = []
            for seq in cmd:
                s.reset()
                ys.append(np.stack([s.step(seq[t]) for t in range(seq.shape[0])]))
            res = np.stack(ys)
        write_npy(wr, res)


if __name__ == "__main__":
    # run as a script, this file's folder heads sys.path, and its nir.py would shadow the nir package
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]
    main(sys.argv[1], sys.argv[2])
