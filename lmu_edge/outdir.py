"""Output directories: written whole or not at all, by one writer, replaced only when lmu-edge owns them.

Every directory lmu-edge writes (an artifact from ``convert``, a report from
``lmu-edge report``) is built in a hidden temporary directory next to its final
place and renamed into place when everything succeeded::

    with outdir.writing(out_dir, overwrite=force) as tmp:
        ...write files into tmp...

* **Ownership.** The last file written is :data:`RECORD`, the SHA-256 of every
  file the run wrote. ``overwrite`` (``--force``) replaces an existing directory
  only if every file in it is recorded there and unchanged, or is a build output
  a target declares (``BUILD_OUTPUTS`` under ``build/`` of an artifact). Anything
  else is refused, naming the unexpected files; nothing is deleted.
* **Exclusive, atomic publishing.** The rename happens under an exclusive lock
  on the parent directory, and only if the destination is still what it was
  when the run started: of two runs writing one new directory, one succeeds and
  the other is refused with a clear message.
* **Nothing half-written.** On any failure, Ctrl-C, SIGTERM or SIGHUP (the CLI
  turns those into exceptions) the temporary directory is removed, and so are
  parent directories the run created. A run killed outright (SIGKILL) leaves
  its temporary directory, named ``.NAME.PID.*.partial``; the next run into the
  same place removes those whose process is gone.
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

RECORD = "lmu-edge-files.json"
RECORD_FORMAT = "lmu-edge-files"
_SHOW = 5


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """``(relative path, lstat)`` of every entry below ``root`` that is not a directory; links not followed.
    Python's ``__pycache__`` directories are skipped: importing an artifact's ``network.py`` may write one, and
    Python rewrites it whenever the file's times change (a copy, a checkout), so it is nobody's content."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            yield os.path.relpath(full, root), os.lstat(full)


def _build_outputs(root: Path) -> set:
    """Relative paths that targets may build later inside the artifacts below ``root``."""
    from . import registry

    allowed = set()
    for man in root.rglob("artifact.json"):
        try:
            target = json.loads(man.read_text()).get("target")
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


def changed_files(directory: Path) -> Optional[list]:
    """Files :data:`RECORD` lists that are missing or changed since lmu-edge wrote them (the build outputs
    a target declares aside: a later build replaces them); ``None`` if ``directory`` has no valid record."""
    files = _recorded(directory)
    if files is None:
        return None
    allowed = _build_outputs(directory)
    bad = []
    for rel, digest in files.items():
        p = directory / rel
        if rel in allowed or "__pycache__" in Path(rel).parts:  # sealed by an earlier lmu-edge: see _walk
            continue
        if p.is_symlink() or not p.is_file() or _sha256(p) != digest:
            bad.append(rel)
    return sorted(bad)


def _recorded(directory: Path) -> Optional[dict]:
    from . import limits

    rec_path = directory / RECORD
    if not rec_path.is_file() or rec_path.is_symlink():
        return None
    try:
        record = limits.load_json(rec_path.read_bytes(), str(rec_path))
        files = record["files"] if record.get("format") == RECORD_FORMAT else None
    except Exception:
        return None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None
    if any(Path(k).is_absolute() or ".." in Path(k).parts for k in files):
        return None  # a record naming files outside its directory is no record of lmu-edge's
    return files


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
        if stat.S_ISREG(st.st_mode) and (rel in allowed or (rel in files and _sha256(directory / rel) == files[rel])):
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


def _pid_alive(pid: int) -> bool:
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
        if m and entry.is_dir() and not entry.is_symlink() and not _pid_alive(int(m.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    return removed


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
def writing(out_dir, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory to write into; on success seal it and publish it as ``out_dir``."""
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
        yield tmp
        seal(tmp)
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
