"""Output directories: written whole or not at all, by one writer, replaced only when lmu-edge owns them.

Every directory lmu-edge writes (an artifact from ``convert``, a report from
``lmu-edge report``) is built in a hidden temporary directory next to its final
place and renamed into place when everything succeeded::

    with outdir.writing(out_dir, overwrite=force) as tmp:
        ...write files into tmp...

* **Ownership.** The last file written is :data:`RECORD`, the SHA-256 of every
  file the run wrote. ``overwrite`` (``--force``) replaces an existing directory
  only if every file in it is recorded there and unchanged, is its signature
  (:data:`SIGNATURE`), a build output a target declares (``BUILD_OUTPUTS`` under
  ``build/`` of an artifact) or the compiled cache of a recorded ``.py`` file
  (``__pycache__/NAME.TAG.pyc``; any other file there is the user's). Anything
  else is refused, naming the unexpected files; nothing is deleted.
* **Exclusive, atomic publishing.** The rename happens under an exclusive lock
  on the parent directory, and only if the destination is still what it was
  when the run started: of two runs writing one new directory, one succeeds and
  the other is refused with a clear message.
* **Nothing half-written.** On any failure, Ctrl-C, SIGTERM or SIGHUP (the CLI
  turns those into exceptions) the temporary directory is removed, and so are
  parent directories the run created. A run killed outright (SIGKILL) leaves
  its temporary directory, named ``.NAME.PID.*.partial`` and holding the marker
  file :data:`PARTIAL_MARKER`; the next run into the same place removes those
  whose process is gone (a directory without the marker is the user's: kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator, Optional

from .errors import OutputExistsError, OutputNotWritableError, os_refusal
from .signing import SIGNATURE  # Ed25519 signature of RECORD (convert --sign)

RECORD = "lmu-edge-files.json"
RECORD_FORMAT = "lmu-edge-files"
#: the file that marks a temporary directory as lmu-edge's: only such directories are swept as stale
PARTIAL_MARKER = ".lmu-edge-partial"
_SHOW = 5


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """``(relative path, lstat)`` of every entry below ``root`` that is not a directory; links not followed."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            yield os.path.relpath(full, root), os.lstat(full)


def _compiled_cache(rel: str, files: dict) -> bool:
    """Whether ``rel`` is where Python's import system caches a recorded ``.py`` file's bytecode
    (``D/__pycache__/NAME.TAG.pyc`` for a recorded ``D/NAME.py``): earlier lmu-edge versions imported an
    artifact's ``network.py`` and wrote one there. lmu-edge never reads it (it runs the sealed source text)."""
    p = Path(rel)
    if p.parent.name != "__pycache__" or p.suffix != ".pyc" or "." not in p.stem:
        return False
    source = p.parent.parent / (p.stem.split(".", 1)[0] + ".py")
    return str(source) in files


def tolerated(rel: str, files: dict, build_outputs: set) -> bool:
    """Whether an unrecorded regular file ``rel`` is one lmu-edge tolerates in an artifact without ever
    running or reading it: a build output a target declares (the C target builds elsewhere now; older
    versions and a user's own ``make`` build there) or a recorded module's compiled cache."""
    return rel in build_outputs or _compiled_cache(rel, files)


def _build_outputs(root: Path) -> set:
    """Relative paths that targets may build later inside the artifacts below ``root``."""
    from . import limits, registry

    allowed = set()
    for man in root.rglob("artifact.json"):
        if man.is_symlink() or not man.is_file():  # a FIFO would block the read; a link leads elsewhere
            continue
        try:
            with open(man, "rb") as f:
                target = limits.load_json(f.read(limits.MAX_JSON_BYTES + 1), str(man)).get("target")
            module = registry.target(target)
        except Exception:  # an unreadable manifest allows nothing extra
            continue
        build = Path(os.path.relpath(man.parent, root)) / getattr(module, "BUILD_DIR", "build")
        for name in getattr(module, "BUILD_OUTPUTS", ()):
            allowed.update({str(build / name), str(build / (name + ".tmp"))})
    return allowed


def seal(root: Path) -> dict:
    """Write :data:`RECORD` into ``root``: every file below it with its SHA-256."""
    files = {}
    for rel, st in sorted(_walk(root)):
        if rel != RECORD and stat.S_ISREG(st.st_mode):
            files[rel] = _sha256(root / rel)
    record = {"format": RECORD_FORMAT, "version": 1, "files": files}
    (root / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True))
    return record


def changed_files(directory: Path, files: Optional[dict] = None) -> Optional[list]:
    """Files :data:`RECORD` (or ``files``, a record read before) lists that are missing or changed since
    lmu-edge wrote them (the build outputs a target declares aside: a later build replaces them); ``None`` if
    ``directory`` has no valid record."""
    if files is None:
        files = _recorded(directory)
    if files is None:
        return None
    allowed = _build_outputs(directory)
    bad = []
    for rel, digest in files.items():
        p = directory / rel
        if rel in allowed or "__pycache__" in Path(rel).parts:  # sealed by an earlier lmu-edge; never read
            continue
        if _linked(directory, rel) or not p.is_file() or _sha256(p) != digest:
            bad.append(rel)
    return sorted(bad)


def _linked(directory: Path, rel: str) -> bool:
    """Whether ``rel`` or any folder on the way to it below ``directory`` is a symbolic link."""
    p = Path(directory)
    for part in Path(rel).parts:
        p = p / part
        if p.is_symlink():
            return True
    return False


def read_record(directory: Path) -> Optional[tuple]:
    """``(the record's bytes, its files)``, read once, or ``None`` if ``directory`` has no valid record."""
    from . import limits

    rec_path = Path(directory) / RECORD
    if not rec_path.is_file() or rec_path.is_symlink():
        return None
    try:
        with open(rec_path, "rb") as f:
            data = f.read(limits.MAX_JSON_BYTES + 1)
        record = limits.load_json(data, str(rec_path))
        files = record["files"] if record.get("format") == RECORD_FORMAT else None
    except Exception:
        return None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None
    if any(not k or Path(k).is_absolute() or ".." in Path(k).parts for k in files):
        return None  # a record naming files outside its directory is no record of lmu-edge's
    return data, files


def _recorded(directory: Path) -> Optional[dict]:
    r = read_record(directory)
    return None if r is None else r[1]


def read_sealed(directory: Path, rel: str, files: Optional[dict]) -> bytes:
    """The bytes of ``directory/rel``, read once; with ``files`` (a record) checked against its SHA-256.
    :class:`ArtifactError` when the file is missing, reached through a link, or not what the seal says."""
    from .errors import ArtifactError

    p = Path(directory) / rel
    if _linked(directory, rel) or not p.is_file():
        raise ArtifactError(f"{directory}: {rel} is missing or a link; convert the model again")
    data = p.read_bytes()
    if files is not None and hashlib.sha256(data).hexdigest() != files.get(rel):
        raise ArtifactError(
            f"{directory}: {rel} changed since lmu-edge wrote it (SHA-256 against {RECORD}); convert the model again"
        )
    return data


def unrecorded(directory: Path, files: dict, build_outputs: set) -> list:
    """Entries below ``directory`` (files, folders, links, anything) that the record ``files`` does not
    list: folders holding no recorded file, every link, every file but the record, its signature and what
    :func:`tolerated` names (in ``build/`` or a ``__pycache__`` folder)."""
    needed = {str(parent) for rel in files for parent in Path(rel).parents if str(parent) != "."}
    for rel in build_outputs:
        needed.add(str(Path(rel).parent))
    bad = []
    for dirpath, dirnames, filenames in os.walk(directory, followlinks=False):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, directory)
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode):
                if rel not in needed and not (name == "__pycache__" and str(Path(rel).parent) in {".", *needed}):
                    bad.append(rel + "/")
                    dirnames.remove(name)
            elif stat.S_ISREG(st.st_mode):
                if rel in files or rel in (RECORD, SIGNATURE) or tolerated(rel, files, build_outputs):
                    continue
                bad.append(rel)
            else:  # a link, FIFO, socket, device
                bad.append(rel)
                if name in dirnames:
                    dirnames.remove(name)
    return sorted(bad)


def unowned_files(directory: Path) -> Optional[list]:
    """Files in ``directory`` that lmu-edge did not write (or that changed since); ``None`` if it has no record."""
    files = _recorded(directory)
    if files is None:
        return None
    allowed = _build_outputs(directory)
    bad = []
    for rel, st in _walk(directory):
        if rel == RECORD:
            continue
        if rel == SIGNATURE and stat.S_ISREG(st.st_mode):
            continue
        if stat.S_ISREG(st.st_mode) and (
            tolerated(rel, files, allowed) or (rel in files and _sha256(directory / rel) == files[rel])
        ):
            continue
        bad.append(rel)
    return sorted(bad)


def check_writable(out_dir: Path) -> None:
    """Refuse early (:class:`OutputNotWritableError`) an output whose nearest existing parent directory
    cannot take the run's temporary directory: a hidden directory is made there and removed at once."""
    p = Path(os.path.abspath(out_dir)).parent
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".lmu-edge-probe.", dir=p))
    except OSError as e:
        raise OutputNotWritableError(
            f"{out_dir}: cannot write in {p} ({e.strerror}); {os_refusal(e) or 'choose another path'}"
        ) from None


def check_replaceable(out_dir: Path, overwrite: bool) -> None:
    """Refuse early (before any work) to write where the run could not publish."""
    out_dir = Path(out_dir)
    check_writable(out_dir)
    if not os.path.lexists(out_dir):
        return
    if out_dir.is_symlink() or not out_dir.is_dir():
        raise OutputExistsError(f"{out_dir}: exists and is not a directory; choose another output path")
    if not any(out_dir.iterdir()):
        return
    if not overwrite:
        raise OutputExistsError(
            f"{out_dir}: output directory exists and is not empty; use --force "
            f"(overwrite=True) to replace earlier lmu-edge output there, or choose another path"
        )
    resolved, cwd = out_dir.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents or resolved == Path.home().resolve():
        raise OutputExistsError(
            f"{out_dir}: refusing to replace the working directory, one of its parents or "
            f"the home directory; choose a new output directory"
        )
    bad = unowned_files(out_dir)
    if bad is None:
        raise OutputExistsError(
            f"{out_dir}: refusing to replace a directory that lmu-edge did not write (it has "
            f"no valid {RECORD}); choose an empty or new directory"
        )
    if bad:
        more = f" and {len(bad) - _SHOW} more" if len(bad) > _SHOW else ""
        raise OutputExistsError(
            f"{out_dir}: refusing to replace it: it holds files lmu-edge did not write or that "
            f"changed since ({', '.join(bad[:_SHOW])}{more}); move them away or choose "
            f"another directory"
        )


def _state(out_dir: Path) -> Optional[str]:
    """What stands at ``out_dir`` now: None (nothing or an empty directory), else a fingerprint."""
    if not os.path.lexists(out_dir):
        return None
    if out_dir.is_dir() and not out_dir.is_symlink() and not any(out_dir.iterdir()):
        return None
    rec = out_dir / RECORD
    try:
        return "record:" + _sha256(rec)
    except OSError:
        return "other"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(out_dir: Path) -> list:
    """Remove temporary directories that killed runs left next to ``out_dir``; returns their names."""
    parent = out_dir.parent
    if not parent.is_dir():
        return []
    pat = re.compile(re.escape(f".{out_dir.name}.") + r"(\d+)\.[^/]*\.(partial|old)\Z")
    removed = []
    for entry in parent.iterdir():
        m = pat.match(entry.name)
        if m and entry.is_dir() and not entry.is_symlink() and _marked(entry) and not pid_alive(int(m.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    return removed


def _mark(directory: Path) -> None:
    """Mark a temporary directory as lmu-edge's (see :func:`sweep_stale`)."""
    (directory / PARTIAL_MARKER).write_text(f"lmu-edge temporary output of process {os.getpid()}\n")


def _marked(directory: Path) -> bool:
    """Whether ``directory`` holds lmu-edge's marker: a user's directory that merely looks like a stale
    partial (``.out.99999.mine.partial``) is never removed."""
    try:
        return stat.S_ISREG(os.lstat(directory / PARTIAL_MARKER).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _locked(directory: Path):
    import fcntl

    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _mode_from_umask(path: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o777 & ~umask)  # mkdtemp makes 0700; give the output the user's usual mode


@contextlib.contextmanager
def writing(out_dir, overwrite: bool = False, sign=None) -> Iterator[Path]:
    """Yield a temporary directory to write into; on success seal it (and sign the seal with the Ed25519
    private key in file ``sign``, :mod:`lmu_edge.signing`) and publish it as ``out_dir``."""
    out_dir = Path(out_dir)
    check_replaceable(out_dir, overwrite)
    before = _state(out_dir)
    created: list[Path] = []  # parent directories this run creates, outermost first
    p = out_dir.parent
    while not p.exists():
        created.insert(0, p)
        p = p.parent
    tmp = None
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(out_dir)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.{os.getpid()}.", suffix=".partial", dir=out_dir.parent))
        _mark(tmp)
        yield tmp
        (tmp / PARTIAL_MARKER).unlink()
        seal(tmp)
        if sign is not None:
            from . import signing

            signing.sign(tmp, sign, (tmp / RECORD).read_bytes())
        _mode_from_umask(tmp)
        with _locked(out_dir.parent):
            now = _state(out_dir)
            if now != before:
                raise OutputExistsError(
                    f"{out_dir}: another run wrote there while this one was working; "
                    f"nothing of this run was kept (run it again, or choose another directory)"
                )
            if now is None:
                if os.path.lexists(out_dir):
                    os.rmdir(out_dir)  # an empty directory: replaced by the new one
                os.rename(tmp, out_dir)
            else:
                check_replaceable(out_dir, overwrite)
                old = Path(
                    tempfile.mkdtemp(prefix=f".{out_dir.name}.{os.getpid()}.", suffix=".old", dir=out_dir.parent)
                )
                _mark(old)
                os.rename(out_dir, old / "x")
                os.rename(tmp, out_dir)
                shutil.rmtree(old, ignore_errors=True)
            tmp = None
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        for d in reversed(created):
            with contextlib.suppress(OSError):
                d.rmdir()  # only if still empty
        raise
