"""Train the layer-option matrix's PyTorch-made models with lmu_edge.torch and save them here.

    python examples/matrix/train_torch.py          # both models (seconds on a CPU)

The same delay task, inputs and sizes as the keras-lmu models (train.py), trained with
:mod:`lmu_edge.torch` in parallel mode and saved as ``NAME.safetensors`` + ``NAME.json`` (the
checkpoint format ``convert`` reads) and ``NAME.npz`` (``x_cal``, ``x_test``). Each is a
``torch.nn.Sequential`` of the layers ``lmu_edge.torch.export`` supports.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from train import SEED, F, T, inputs, save_data  # noqa: E402  (train.py beside this script: importable after the sys.path line)


def _models():
    import torch

    from lmu_edge.torch import LMU

    nn = torch.nn
    return {
        # Linear before, ZOH, memory_d 2, ReLU hidden with input_to_hidden and encoder bias, last step only
        "torch_linear_before_relu_i2h": lambda: nn.Sequential(
            nn.Linear(F, 3),
            nn.Tanh(),
            LMU(
                3,
                memory_d=2,
                order=6,
                theta=12.0,
                use_bias=True,
                hidden_units=8,
                hidden_activation="relu",
                input_to_hidden=True,
                return_sequences=False,
            ),
            nn.Linear(8, 1),
        ),
        # Euler, trainable theta, no hidden cell, the whole sequence out, a Linear readout per step
        "torch_euler_tt_nohidden_seq": lambda: nn.Sequential(
            LMU(F, memory_d=1, order=6, theta=20.0, discretizer="euler", trainable_theta=True, return_sequences=True),
            nn.Linear(6, 1),
        ),
    }


def _target(x: np.ndarray, seq: bool) -> np.ndarray:
    d = np.zeros_like(x[..., :1])
    d[:, 5:] = x[:, :-5, :1]
    return d if seq else d.mean(axis=1)


def main(names=None) -> None:
    import torch

    from lmu_edge.torch import save_checkpoint

    for name, make in _models().items():
        if names and name not in names:
            continue
        torch.manual_seed(SEED)
        model = make().double()
        seq = name.endswith("_seq")
        x = torch.tensor(inputs(64, SEED), dtype=torch.float64)
        y = torch.tensor(_target(inputs(64, SEED), seq), dtype=torch.float64)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(60):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        save_checkpoint(model.float(), HERE / f"{name}.safetensors")
        save_data(name)
        print(f"wrote {name}.safetensors, .json and .npz (training loss {loss.item():.4f}, T={T})")


if __name__ == "__main__":
    main(sys.argv[1:])
