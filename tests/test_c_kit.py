"""The C artifact as a library: the kit OUT/<prefix>/ built the way a firmware builds it.

CMake for the host (gcc and clang), for Cortex-M4 with a toolchain file (run under qemu-system-arm) and for
Linux on aarch64 with Debian's cross gcc (run under qemu-aarch64); a Makefile through sources.mk. Every output
of the kit's examples/main.c is compared with the C target's own run of the same sequence (integers bit for
bit), and two models of different prefixes link into one image. Also: what <prefix>.h states, the runtime
version check, and the library manifests (PlatformIO's own parser; the Zephyr and Arduino fields)."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from target_models import configurations

import lmu_edge
from lmu_edge import intsim, outdir, toolchain
from lmu_edge.targets import c as c_target
from lmu_edge.targets import c_kit

T = 40  # the steps model A is trained on (its graph's seq_len)
ARM_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm")
AARCH64_TOOLS = ("aarch64-linux-gnu-gcc", "qemu-aarch64")


def _need(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed (Debian: cmake clang gcc-arm-none-eabi libnewlib-arm-none-eabi "
            "qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)"
        )


@pytest.fixture(scope="module")
def kits(tmp_path_factory):
    """Model A: int8, prefix kws, softmax over a pooled sequence (the answer is the last step's), trained on
    T steps. Model B: float32, prefix seq, a sequence model with a linear head (every step is an answer)."""
    cfg = configurations()
    a = cfg["pooling"].replace(seq_len=T)
    b = cfg["rk4"]
    rng = np.random.default_rng(5)
    xa = rng.standard_normal((4, T, a.input_features))
    xb = rng.standard_normal((4, 30, b.input_features))
    d = tmp_path_factory.mktemp("kits")
    art_a = lmu_edge.convert(a, "c", d / "a", quantize="int8", calibration=xa, prefix="kws", measure=False, flash=False)
    art_b = lmu_edge.convert(b, "c", d / "b", calibration=xb, prefix="seq", measure=False, flash=False)
    qg = lmu_edge.load(art_a.path / "quantized.lmu.npz")
    ref_a = {}  # the C target's own run of the example's sequence (the first calibration sequence)
    xq = intsim.quantize_input(qg, xa[:1]).astype(np.int8)
    for rt in ("host", "cortex-m4"):
        if rt == "host" or all(shutil.which(t) for t in ARM_TOOLS):
            ref_a[rt] = c_target.run_native(art_a, xq, rt)[0][0]
    # what lmu-edge run gives (Artifact.run): A's answer (its last step, dequantized), B's every step
    answer_a = art_a.run(xa[:1])[0]
    ref_b = art_b.run(xb[:1])[0]
    assert np.array_equal(answer_a, intsim.dequantize_output(qg, ref_a["host"][-1]))
    return {"a": art_a, "b": art_b, "qg": qg, "ref_a": ref_a, "ref_b": ref_b, "answer_a": answer_a, "xa": xa}


def _steps(stdout: str, prefix_line: str = "step") -> np.ndarray:
    rows = [ln.split()[2:] for ln in stdout.splitlines() if ln.startswith(prefix_line + " ")]
    return np.array([[float(v) for v in r] for r in rows])


def _project(tmp_path, kits, startup=None) -> object:
    """A firmware's CMake project: both kits as libraries, each kit's example, and one image linking both
    models whose main runs both examples (their main renamed)."""
    src = tmp_path / "src"
    for key, prefix in (("a", "kws"), ("b", "seq")):
        shutil.copytree(kits[key].path / prefix, src / prefix)
    (src / "both.c").write_text(
        "int example_kws(void);\nint example_seq(void);\nint main(void) { return example_kws() | example_seq(); }\n"
    )
    extra = f'"{startup}"' if startup else ""
    (src / "CMakeLists.txt").write_text(
        f"""cmake_minimum_required(VERSION 3.13)
project(firmware C)
add_subdirectory(kws)
add_subdirectory(seq)
foreach(m kws seq)
  add_executable(example_${{m}} ${{m}}/examples/main.c {extra})
  target_link_libraries(example_${{m}} PRIVATE ${{m}})
  add_library(renamed_${{m}} OBJECT ${{m}}/examples/main.c)
  target_compile_definitions(renamed_${{m}} PRIVATE main=example_${{m}})
  target_link_libraries(renamed_${{m}} PRIVATE ${{m}})
endforeach()
add_executable(both both.c {extra} $<TARGET_OBJECTS:renamed_kws> $<TARGET_OBJECTS:renamed_seq>)
target_link_libraries(both PRIVATE kws seq)
"""
    )
    return src


def _cmake(src, build, *args):
    _need("cmake")
    r = subprocess.run(["cmake", "-S", src, "-B", build, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run(["cmake", "--build", build, "-j2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "warning" not in r.stdout + r.stderr


def _check_outputs(kits, out_kws: str, out_seq: str, ref_a, float_exact: bool, no_float: bool = False):
    """Every step of both examples against the C target's run of the same sequence."""
    ya = _steps(out_kws)
    assert ya.shape == ref_a.shape and np.array_equal(ya.astype(np.int64), ref_a.astype(np.int64))
    answer = [ln for ln in out_kws.splitlines() if ln.startswith("answer ")]
    assert len(answer) == (0 if no_float else 1)  # KWS_NO_FLOAT leaves the float API (and this line) out
    if answer:
        deq = np.array([float(v) for v in answer[0].split()[1:]], np.float32)
        np.testing.assert_array_equal(deq, kits["answer_a"].astype(np.float32))
    yb = _steps(out_seq)
    assert yb.shape == kits["ref_b"].shape
    if float_exact:  # float32 printed with 9 significant digits: read back exactly
        np.testing.assert_array_equal(yb.astype(np.float32), kits["ref_b"].astype(np.float32))
    else:
        np.testing.assert_allclose(yb, kits["ref_b"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_cmake_host_build_of_two_kits_matches_the_c_target_run(kits, tmp_path, cc):
    _need(cc)
    src = _project(tmp_path, kits)
    build = tmp_path / "build"
    # clang: a debug build of the int8 model without its float API (KWS_NO_FLOAT: LMU_NO_FLOAT)
    opts = ["-DCMAKE_BUILD_TYPE=Release"] if cc == "gcc" else ["-DCMAKE_BUILD_TYPE=Debug", "-DKWS_NO_FLOAT=ON"]
    _cmake(src, build, f"-DCMAKE_C_COMPILER={cc}", *opts)
    outs = {}
    for exe in ("example_kws", "example_seq", "both"):
        r = subprocess.run([build / exe], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        outs[exe] = r.stdout
    ref = kits["ref_a"]["host"]
    _check_outputs(kits, outs["example_kws"], outs["example_seq"], ref, float_exact=cc == "gcc", no_float=cc == "clang")
    assert outs["both"] == outs["example_kws"] + outs["example_seq"]  # two models, one image, no interference


def test_cmake_cortex_m4_build_with_a_toolchain_file_runs_under_qemu(kits, tmp_path):
    _need("cmake", *ARM_TOOLS)
    rt = toolchain.ARM_RUNTIMES["cortex-m4"]
    top = kits["a"].path / "harness"  # the artifact's harness folder: the startup code and QEMU's linker script
    (tmp_path / "cortex-m4.cmake").write_text(
        f"""set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_C_FLAGS_INIT "-mthumb {" ".join(rt.cpu_flags)}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-nostartfiles --specs=rdimon.specs -T {top / rt.linker_script}")
"""
    )
    src = _project(tmp_path, kits, startup=top / "startup.c")
    build = tmp_path / "build"
    _cmake(src, build, f"-DCMAKE_TOOLCHAIN_FILE={tmp_path / 'cortex-m4.cmake'}", "-DCMAKE_BUILD_TYPE=MinSizeRel")
    outs = {}
    for exe in ("example_kws", "example_seq", "both"):
        r = subprocess.run(
            toolchain.qemu_command("cortex-m4", build / exe), capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        outs[exe] = r.stdout
    _check_outputs(kits, outs["example_kws"], outs["example_seq"], kits["ref_a"]["cortex-m4"], float_exact=False)
    assert outs["both"] == outs["example_kws"] + outs["example_seq"]
    assert np.array_equal(kits["ref_a"]["cortex-m4"], kits["ref_a"]["host"])


def test_cmake_aarch64_linux_build_runs_under_qemu_user(kits, tmp_path):
    _need("cmake", *AARCH64_TOOLS)
    (tmp_path / "aarch64.cmake").write_text(
        "set(CMAKE_SYSTEM_NAME Linux)\nset(CMAKE_SYSTEM_PROCESSOR aarch64)\n"
        "set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)\n"
    )
    src = _project(tmp_path, kits)
    build = tmp_path / "build"
    _cmake(src, build, f"-DCMAKE_TOOLCHAIN_FILE={tmp_path / 'aarch64.cmake'}", "-DCMAKE_BUILD_TYPE=Release")
    outs = {}
    for exe in ("example_kws", "example_seq"):
        r = subprocess.run(
            ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", build / exe], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, r.stderr[-2000:]
        outs[exe] = r.stdout
    _check_outputs(kits, outs["example_kws"], outs["example_seq"], kits["ref_a"]["host"], float_exact=False)


def test_sources_mk_builds_the_example_with_make(kits, tmp_path):
    _need("make", "gcc")
    shutil.copytree(kits["a"].path / "kws", tmp_path / "lib" / "kws")
    (tmp_path / "Makefile").write_text(
        "include lib/kws/sources.mk\n"
        "app: lib/kws/examples/main.c $(KWS_SRCS) $(KWS_HEADERS)\n"
        "\tgcc -std=c99 -Wall -Wextra -Werror -pedantic -O2 $(KWS_CFLAGS) lib/kws/examples/main.c $(KWS_SRCS)"
        " -o $@ -lm\n"
    )
    subprocess.run(["make", "-s", "app"], cwd=tmp_path, check=True, capture_output=True)
    r = subprocess.run([tmp_path / "app"], capture_output=True, text=True, check=True)
    assert np.array_equal(_steps(r.stdout).astype(np.int64), kits["ref_a"]["host"].astype(np.int64))


def test_the_kit_holds_exactly_what_the_source_includes(kits):
    for key, prefix in (("a", "kws"), ("b", "seq")):
        kit = kits[key].path / prefix
        src = (kit / f"{prefix}.c").read_text()
        headers = set(c_kit.runtime_headers(src))
        # lmu_runtime.h includes every kernel family header (the kit copies them all)
        optional = {"lmu_pade.h", "lmu_bandconv.h", "lmu_frontend.h"}  # included by a model or the front end
        families = {p.name for p in c_kit.TEMPLATES.glob("lmu_*.h")} - optional
        assert {"lmu_runtime.h", "lmu_config.h", "lmu_qlinear.h", "lmu_dense16.h"} <= families <= headers
        code = {p.name for p in kit.iterdir() if p.suffix in (".c", ".h")}
        assert code == {f"{prefix}.c", f"{prefix}.h", *headers}
        # one copy of the model's source: the kit's; the harness in a folder of its own; the rest is lmu-edge's
        top = {p.name for p in kits[key].path.iterdir()}
        data = {"quantized.lmu.npz"} if key == "a" else set()
        assert top == {prefix, "harness", "artifact.json", "lmu-edge-files.json", "report.json", "report.html"} | {
            "source.lmu.npz",
            "model.lmu.npz",
            *data,
        }
        harness = {p.name for p in (kits[key].path / "harness").iterdir()}
        assert harness == {"harness.c", "startup.c", "Makefile", *toolchain.LINKER_SCRIPTS}
        assert set(kits[key].manifest["files"]) >= {f"harness/{n}" for n in harness} | {f"{prefix}/{prefix}.c"}
        assert not any(p.suffix in (".ld", ".npz") or p.name in ("harness.c", "startup.c") for p in kit.rglob("*"))
    # a Pade model's source includes lmu_pade.h, and its kit has it
    assert "lmu_pade.h" in c_kit.runtime_headers('#include "lmu_runtime.h"\n#include "lmu_pade.h"\n')


def test_the_header_states_the_sequence_contract_and_the_int8_call(kits):
    h = (kits["a"].path / "kws" / "kws.h").read_text()
    top = h.split("*/", 1)[0]
    assert f"trained on sequences of {T} steps" in top
    assert "only the output after a sequence's last step is the model's answer" in top
    assert "probabilities (a softmax" in top
    assert "kws_step_int8(&s, x, y);" in top and "kws_quantize_input(sample, x);" in top
    assert f"#define KWS_SEQUENCE_STEPS {T}" in h and "#define KWS_OUTPUT_EVERY_STEP 0" in h
    assert "static inline void kws_quantize_input(const float *x, int8_t *q)" in h
    assert "static inline void kws_dequantize_output(const int8_t *q, float *y)" in h
    hb = (kits["b"].path / "seq" / "seq.h").read_text().split("*/", 1)[0]
    assert "every step's output is an answer" in hb and "fixes no sequence length" in hb
    assert "seq_step(&s, x, y);" in hb and "_int8" not in hb


def test_quantize_helpers_equal_the_integer_reference_over_the_input_range(kits, tmp_path):
    """kws_quantize_input on every float from -3 to 3 full scale (rounding midpoints included) against
    intsim.quantize_input, and kws_dequantize_output on every int8 against intsim.dequantize_output."""
    _need("gcc")
    qg = kits["qg"]
    scale, zp = intsim.input_qparams(qg)
    grid = (np.arange(-130 * 4, 130 * 4 + 1) / 4.0 - zp) * np.float32(scale)  # quarter steps: midpoints hit
    x = np.concatenate([grid, [1e12, -1e12, 0.0]]).astype(np.float32)
    x = x[: len(x) // 2 * 2]  # pairs: KWS_N_INPUTS is 2
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    (tmp_path / "t.c").write_text(
        """#include <stdio.h>
#include "kws.h"
int main(void) {
    float x[KWS_N_INPUTS], y[KWS_N_OUTPUTS];
    int8_t q[KWS_N_INPUTS], all[256];
    int i;
    FILE *f = fopen("x.bin", "rb");
    while (fread(x, sizeof(float), KWS_N_INPUTS, f) == KWS_N_INPUTS) {
        kws_quantize_input(x, q);
        for (i = 0; i < KWS_N_INPUTS; ++i) printf("%d\\n", q[i]);
    }
    for (i = 0; i < 256; ++i) all[i] = (int8_t)(i - 128);
    for (i = 0; i + KWS_N_OUTPUTS <= 256; i += KWS_N_OUTPUTS) {
        int k;
        kws_dequantize_output(all + i, y);
        for (k = 0; k < KWS_N_OUTPUTS; ++k) printf("d %.9g\\n", (double)y[k]);
    }
    return 0;
}
"""
    )
    kit = kits["a"].path / "kws"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", f"-I{kit}", "t.c", "-o", "t"], cwd=tmp_path, check=True)
    out = subprocess.run([tmp_path / "t"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split("\n")
    q = np.array([int(v) for v in out if v and not v.startswith("d ")])
    np.testing.assert_array_equal(q, intsim.quantize_input(qg, x.astype(np.float64)))
    d = np.array([float(v[2:]) for v in out if v.startswith("d ")], np.float32)
    ints = np.arange(-128, -128 + len(d))
    np.testing.assert_array_equal(d, intsim.dequantize_output(qg, ints).astype(np.float32))


def test_runtimes_of_two_versions_in_one_build_fail_to_compile_with_a_message(kits, tmp_path):
    _need("gcc")
    kit = kits["a"].path / "kws"
    number, string = c_kit.runtime_version()
    major, minor, patch = (int(v) for v in lmu_edge.__version__.split(".")[:3])
    assert (number, string) == (10000 * major + 100 * minor + patch, lmu_edge.__version__)
    runtime = (kit / "lmu_runtime.h").read_text()
    assert (
        runtime.count(f"LMU_RUNTIME_VERSION != {number}") == 1 and f"#define LMU_RUNTIME_VERSION {number}\n" in runtime
    )
    for d in ("same", "other"):
        (tmp_path / d).mkdir()
        for family in c_kit.runtime_headers('#include "lmu_runtime.h"')[1:]:
            shutil.copy(kit / family, tmp_path / d)
    (tmp_path / "same" / "lmu_runtime.h").write_text(runtime)
    (tmp_path / "other" / "lmu_runtime.h").write_text(runtime.replace(str(number), str(number + 1)))

    def compile_(source: str, *inc) -> subprocess.CompletedProcess:
        (tmp_path / "t.c").write_text(source)
        flags = ["-std=c99", "-Wall", "-Werror", "-c", "-o", "/dev/null", *(f"-I{i}" for i in inc)]
        return subprocess.run(["gcc", *flags, "t.c"], cwd=tmp_path, capture_output=True, text=True)

    two = '#include "{}/lmu_runtime.h"\n#include "{}/lmu_runtime.h"\nint lmu_probe(void) {{ return 0; }}\n'
    assert compile_(two.format(kit, tmp_path / "same")).returncode == 0  # one version twice: one copy, the guard
    r = compile_(two.format(kit, tmp_path / "other"))
    assert r.returncode != 0 and "two lmu-edge runtime versions in one build" in r.stderr
    # the generated source checks the runtime it is compiled with
    shutil.copy(kit / "kws.c", tmp_path / "other")
    shutil.copy(kit / "kws.h", tmp_path / "other")
    r = subprocess.run(
        ["gcc", "-std=c99", "-c", "-o", "/dev/null", "kws.c"], cwd=tmp_path / "other", capture_output=True, text=True
    )
    assert r.returncode != 0 and f"kws.c was generated for lmu_runtime.h {string}" in r.stderr
    r = subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-c", "-o", "/dev/null", "kws.c"], cwd=kit)
    assert r.returncode == 0


def test_library_json_passes_platformios_own_manifest_parser(kits, tmp_path):
    from platformio.package.exception import ManifestValidationError
    from platformio.package.manifest.parser import ManifestParserFactory
    from platformio.package.manifest.schema import ManifestSchema

    for key, prefix in (("a", "kws"), ("b", "seq")):
        kit = kits[key].path / prefix
        for name in ("library.json", "library.properties"):  # PlatformIO reads Arduino's file too
            raw = ManifestParserFactory.new_from_file(str(kit / name)).as_dict()
            data = ManifestSchema().load_manifest(raw)
            assert data["name"] == prefix and data["version"] == lmu_edge.__version__
            assert data["headers"] == [f"{prefix}.h"]
        build = json.loads((kit / "library.json").read_text())["build"]
        assert build["srcFilter"] == ["-<*>", f"+<{prefix}.c>"] and build["includeDir"] == "."
    bad = json.loads((kits["a"].path / "kws" / "library.json").read_text())
    bad["version"] = "one"
    (tmp_path / "library.json").write_text(json.dumps(bad))
    with pytest.raises(ManifestValidationError):
        ManifestSchema().load_manifest(ManifestParserFactory.new_from_file(str(tmp_path / "library.json")).as_dict())


def test_zephyr_module_and_arduino_properties_have_their_required_fields(kits):
    """Zephyr's module.yml: build.cmake names a folder with a CMakeLists.txt, build.kconfig a Kconfig file
    defining the symbol that CMakeLists.txt tests. Arduino's library.properties (1.5 format): every field its
    specification requires, a name of the allowed characters, a semantic version, an architectures list."""
    yaml = pytest.importorskip("yaml", reason="PyYAML not installed")
    for key, prefix in (("a", "kws"), ("b", "seq")):
        kit = kits[key].path / prefix
        mod = yaml.safe_load((kit / "zephyr" / "module.yml").read_text())
        assert mod["name"] == prefix and re.fullmatch(r"[A-Za-z0-9_-]+", mod["name"])
        cmake = (kit / mod["build"]["cmake"] / "CMakeLists.txt").read_text()
        kconfig = (kit / mod["build"]["kconfig"]).read_text()
        symbol = f"LMU_EDGE_{prefix.upper()}"
        assert f"config {symbol}\n" in kconfig and f"if(CONFIG_{symbol})" in cmake
        assert f"/../{prefix}.c)" in cmake and "zephyr_include_directories(${CMAKE_CURRENT_LIST_DIR}/..)" in cmake
        props = dict(
            line.split("=", 1) for line in (kit / "library.properties").read_text().splitlines() if "=" in line
        )
        required = ("name", "version", "author", "maintainer", "sentence", "paragraph", "category", "url")
        assert all(props.get(f) for f in (*required, "architectures")), props
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9 _.-]*", props["name"]) and props["name"] == prefix
        assert re.fullmatch(r"\d+\.\d+\.\d+", props["version"]) and props["includes"] == f"{prefix}.h"
        assert props["category"] in (
            "Display", "Communication", "Signal Input/Output", "Sensors", "Device Control", "Timing",
            "Data Storage", "Data Processing", "Other",
        )  # fmt: skip


def test_a_prefix_that_would_collide_with_the_harness_is_refused(tmp_path):
    g = configurations()["rk4"]
    for bad in ("harness", "Harness", "build"):
        with pytest.raises(lmu_edge.errors.ArtifactError, match="kit folder"):
            lmu_edge.convert(g, "c", tmp_path / bad, prefix=bad, measure=False)
        assert not (tmp_path / bad).exists()


def test_an_artifact_written_before_the_harness_folder_still_runs(kits, tmp_path):
    """Older artifacts had the harness, startup code, linker scripts and Makefile at the top, beside the kit
    (their Makefile's LMU_KIT ?= <prefix>): run and verify still build and run them, from there."""
    old = tmp_path / "old"
    shutil.copytree(kits["a"].path, old)
    for f in sorted((old / "harness").iterdir()):
        f.rename(old / f.name)
    (old / "harness").rmdir()
    mk = old / "Makefile"
    assert "LMU_KIT ?= ../kws\n" in mk.read_text()
    mk.write_text(mk.read_text().replace("LMU_KIT ?= ../kws\n", "LMU_KIT ?= kws\n"))
    outdir.seal(old)
    art = lmu_edge.open_artifact(old)
    assert np.array_equal(art.run(kits["xa"][:1])[0], kits["answer_a"])
