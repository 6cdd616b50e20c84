"""The time-series examples: GunPoint and Mackey-Glass streamed through the compiled C."""

import shutil
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "examples" / "timeseries"))
import stream


@pytest.mark.slow
def test_streamed_c_keeps_the_task_metric_and_host_equals_cortex_m4(tmp_path):
    qemu = bool(shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc"))
    rows = stream.run(("c",), qemu=qemu, out_root=tmp_path, verbose=False)
    got = {(r[0], r[1]): r for r in rows}
    src_acc = got[("gunpoint", "source model (float64)")][3]
    assert src_acc >= 0.9  # the shipped model really classifies
    assert got[("gunpoint", "c float (host)")][3] == pytest.approx(src_acc)
    assert got[("gunpoint", "c int8 (host)")][3] >= src_acc - 0.03
    src_nrmse = got[("mackey_glass", "source model (float64)")][3]
    assert src_nrmse < 0.3
    assert got[("mackey_glass", "c int8 (host)")][3] <= src_nrmse * 1.1
    if qemu:
        for task in ("gunpoint", "mackey_glass"):
            assert got[(task, "c int8: host == cortex-m4")][2] == "identical"
            assert got[(task, "c float: host == cortex-m4")][2] == "identical"
            assert got[(task, "c int8 (cortex-m4)")][4] > 0  # instructions per step were measured


@pytest.mark.slow
def test_streamed_tflite_keeps_the_task_metric(tmp_path):
    pytest.importorskip("tensorflow", reason="tensorflow not installed: pip install 'lmu-edge[tflite]'")
    pytest.importorskip("ai_edge_litert", reason="ai-edge-litert not installed: pip install 'lmu-edge[tflite]'")
    rows = stream.run(("tflite",), qemu=False, out_root=tmp_path, verbose=False)
    got = {(r[0], r[1]): r for r in rows}
    src_acc = got[("gunpoint", "source model (float64)")][3]
    assert got[("gunpoint", "tflite float (litert)")][3] == pytest.approx(src_acc)
    assert got[("gunpoint", "tflite int8 (litert)")][3] >= src_acc - 0.03
    src_nrmse = got[("mackey_glass", "source model (float64)")][3]
    assert got[("mackey_glass", "tflite float (litert)")][3] == pytest.approx(src_nrmse, rel=1e-4)
    assert got[("mackey_glass", "tflite int8 (litert)")][3] <= src_nrmse * 1.1
