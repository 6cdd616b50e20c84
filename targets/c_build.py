"""Building a C artifact: its sealed harness Makefile (``harness/Makefile``) and sources copied into a private
directory of this process and built there (``make -f Makefile`` in its ``harness/``), one directory per distinct
set of sources, removed at exit; nothing in the artifact folder is read, run or written (docs/security.md). An
artifact written before the harness folder existed (its Makefile at the top) builds the same way from there."""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

from .. import toolchain
from ..errors import LmuEdgeError

#: the artifact's folder of the harness, startup code, linker scripts and Makefile (c_kit.HARNESS_DIR)
HARNESS_DIR = "harness"
#: what the Makefile builds, all under harness/build/ of a private build directory (never inside the artifact:
#: an artifact folder may hold these names from a user's own make there, and they are never run)
BUILD_DIR = f"{HARNESS_DIR}/build"
BUILD_OUTPUTS = (
    "harness_host",
    "libmodel.so",
    *(f"model_{r.tag}.{ext}" for r in toolchain.ARM_RUNTIMES.values() for ext in ("elf", "o")),
)
#: the artifact's files make reads: the Makefile, C sources and headers, linker scripts (nothing else is copied)
_SOURCE_SUFFIXES = (".c", ".h", ".ld")
#: where the Makefile is: the harness folder, or the top of an artifact written before it existed
_MAKEFILES = (f"{HARNESS_DIR}/Makefile", "Makefile")
_BUILDS: dict = {}  # digest of the sources -> private build directory, most recent last
_BUILDS_LOCK = threading.Lock()
_BUILDS_PID = [os.getpid()]  # the process whose directories _BUILDS names (a forked child starts afresh)
_MAX_BUILDS = 8
_BUILD_PREFIX = "lmu-edge-build-"


def sources(directory: Path, sealed) -> dict:
    """``{name: bytes}`` of the files the Makefile builds from, read once. An opened artifact's are those its
    seal records (``sealed``, :attr:`Artifact.sealed`: each checked against its SHA-256); without one (the
    directory convert is writing now, or an :class:`Artifact` made without :func:`open_artifact`) the
    directory's files as they stand."""
    from ..errors import ArtifactError
    from ..outdir import read_sealed

    directory = Path(directory)
    if sealed is not None:
        # the harness folder's Makefile and sources, and the sources of the kit folder
        names = [n for n in sealed if n in _MAKEFILES or n.endswith(_SOURCE_SUFFIXES)]
        out = {n: read_sealed(directory, n, sealed) for n in sorted(names)}
    else:  # sources in sub-folders too (a firmware of several models: one folder of C per model)
        out = {
            p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*"))
            if not p.is_symlink()
            and p.is_file()
            and (p.name == "Makefile" or p.name.endswith(_SOURCE_SUFFIXES))
            and not any(part == "build" or part.startswith(".") for part in p.relative_to(directory).parts[:-1])
        }
    if not any(mk in out for mk in _MAKEFILES):
        raise ArtifactError(
            f"{directory}: no {HARNESS_DIR}/Makefile among the artifact's files; convert the model again"
        )
    return out


def _make_dir(files: dict) -> str:
    """The folder (relative) of the Makefile among ``files``: ``harness``, or ``.`` in an older artifact."""
    return next(str(Path(mk).parent) for mk in _MAKEFILES if mk in files)


def _private_build_dir(sources: dict) -> Path:
    """A directory only this process writes, holding exactly ``sources``: one per distinct set of sources,
    reused while this process runs (the few most recent kept), removed at exit."""
    import hashlib

    h = hashlib.sha256()
    for name, data in sorted(sources.items()):
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    key = h.hexdigest()
    if _BUILDS_PID[0] != os.getpid():  # forked: the parent's directories are the parent's to remove
        _BUILDS.clear()
        _BUILDS_PID[0] = os.getpid()
        _STALE_SWEPT.clear()
    d = _BUILDS.pop(key, None)
    if d is None or not d.is_dir():
        sweep_stale_builds()
        # mode 0700: nobody else writes in it
        d = Path(tempfile.mkdtemp(prefix=f"{_BUILD_PREFIX}{os.getpid()}-"))
        for name, data in sources.items():
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_bytes(data)
    _BUILDS[key] = d
    while len(_BUILDS) > _MAX_BUILDS:
        shutil.rmtree(_BUILDS.pop(next(iter(_BUILDS))), ignore_errors=True)
    return d


_STALE_SWEPT: list = []


def sweep_stale_builds() -> None:
    """Once per process, remove this user's build directories whose process is gone (killed, or ended by
    ``os._exit`` as forked workers do, so that its exit handler never ran)."""
    if _STALE_SWEPT:
        return
    _STALE_SWEPT.append(True)
    from ..outdir import pid_alive

    for entry in Path(tempfile.gettempdir()).glob(f"{_BUILD_PREFIX}*-*"):
        pid = entry.name[len(_BUILD_PREFIX) :].split("-", 1)[0]
        try:
            st = entry.lstat()
        except OSError:
            continue
        if pid.isdigit() and stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not pid_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


@atexit.register
def _remove_builds() -> None:
    if _BUILDS_PID[0] != os.getpid():
        return
    while _BUILDS:
        shutil.rmtree(_BUILDS.popitem()[1], ignore_errors=True)


def make(directory: Path, target: str, *more: str, sealed=None) -> Path:
    """Build ``target`` and any ``more`` (of :data:`BUILD_OUTPUTS`) from the artifact in ``directory``;
    returns the first one's path. Several targets build in one make run, as many at once as there are cores
    (the per-core objects of a conversion: about half the time on two cores).

    The build never happens in the artifact: its sealed Makefile and sources (``sealed``, the seal checked when
    it was opened; see :func:`sources`) are copied into a private temporary directory and built there with
    ``make -f Makefile``, so nothing else in the artifact folder (a ``GNUmakefile``, a planted ``build/``
    binary or library, a ``build`` link) is read, run or written. Concurrent runs of one artifact share
    nothing."""
    targets = (target, *more)
    for t in targets:
        if t not in BUILD_OUTPUTS:
            raise ValueError(f"unknown build target {t!r}")
    make_tool = toolchain.need("make", "make")
    if any(t.endswith((".elf", ".o")) for t in targets):
        toolchain.need("arm-none-eabi-gcc", "gcc-arm-none-eabi libnewlib-arm-none-eabi")
    if not all(t.endswith((".elf", ".o")) for t in targets):
        toolchain.need("gcc", "gcc")
    files = sources(Path(directory), sealed)
    rels = [f"build/{t}" for t in targets]  # in the Makefile's folder
    jobs = max(1, min(len(targets), os.cpu_count() or 1))
    with _BUILDS_LOCK:
        work = _private_build_dir(files) / _make_dir(files)
        todo = [r for r in rels if not (work / r).is_file()]
        if todo:
            env = {k: v for k, v in os.environ.items() if k not in ("LMU_KIT", "LMU_MODEL_SRC")}  # the sealed kit
            # the Makefile's warning flags less -Werror: a compiler's warning is reported, not a failed build
            warn = "WARN=" + " ".join(f for f in toolchain.WARN if f != "-Werror")
            r = subprocess.run(
                [make_tool, "-f", "Makefile", "-s", f"-j{jobs}", warn, *todo],
                cwd=work,
                capture_output=True,
                text=True,
                env=env,
            )
            if r.returncode != 0:
                msg = (r.stderr or r.stdout).strip().splitlines()
                raise LmuEdgeError(f"building {', '.join(targets)} of {directory} failed: {' / '.join(msg[-3:])}")
            said = [ln.strip() for ln in (r.stderr or "").splitlines() if "warning:" in ln]
            if said:
                import warnings

                warnings.warn(
                    f"building {', '.join(targets)} of {directory}: the compiler warned ({len(said)} x): {said[0]}; "
                    f"the build went on; please report it with the model",
                    stacklevel=2,
                )
    return work / rels[0]


def make_what_fits(directory: Path, images: list, sealed=None) -> dict:
    """:func:`make` of ``images`` in one run; where that fails because a Cortex-M image overflows its QEMU board's
    memory (``region ... overflowed``: a model larger than the board, which only the instruction count needs),
    each image alone. Returns ``{image: why it was not built}`` for the images left out (none: ``{}``); any other
    failure, or one of the host's, is raised."""
    try:
        make(directory, *images, sealed=sealed)
        return {}
    except LmuEdgeError as e:  # a parallel make's last lines may be another job's: the linker failing is enough
        if "overflowed" not in str(e) and "ld returned" not in str(e):
            raise
    left = {}
    for image in images:
        try:
            make(directory, image, sealed=sealed)
        except LmuEdgeError as e:
            said = [p.strip() for p in str(e).split(" / ") if "overflowed" in p]
            if not said or not image.endswith(".elf"):
                raise
            left[image] = said[0].split("ld: ")[-1]
    return left
