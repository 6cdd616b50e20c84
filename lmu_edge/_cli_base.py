"""What every ``lmu-edge`` command shares: the group that turns every error into one line on stderr and a
non-zero exit (:class:`Group`), finite-number options, progress messages and the target names."""

from __future__ import annotations

import os
import sys

import click

EPILOG = (
    "Docs: 'lmu-edge docs' lists the pages shipped with lmu-edge, 'lmu-edge docs PAGE' prints one. Errors print "
    "one line; set LMU_EDGE_DEBUG=1 to see a traceback."
)


class Interrupted(BaseException):
    """Raised by the SIGTERM / SIGHUP / SIGINT handler, so that every ``finally`` and cleanup runs."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def on_signal(signum, frame):
    """The signal handler :class:`Group` installs while a command runs."""
    raise Interrupted(signum)


#: click >= 8.2 raises this for a group called without arguments (8.1 prints the help itself)
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class Group(click.Group):
    """Turns every error, usage errors included, into one line on stderr and a non-zero exit code.

    Warnings (numpy's, the converters') are collected while a command runs and printed, one line each,
    only when it succeeds: an error is never preceded by a warning it explains better."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """click's ``main`` with the signal handlers installed and every error made one line."""
        import signal

        previous = {}
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            try:
                previous[sig] = signal.signal(sig, on_signal)
            except (ValueError, OSError):  # not the main thread (e.g. a test runner): leave it alone
                pass
        try:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except _NO_ARGS_IS_HELP as e:  # "lmu-edge" alone: the help as it reads, exit 2
            click.echo(e.ctx.get_help(), err=True)
            sys.exit(e.exit_code)
        except click.UsageError as e:
            cmd = e.ctx.command_path if e.ctx is not None else "lmu-edge"
            self._fail(f"{e.format_message()} (see '{cmd} --help')", e.exit_code)
        except click.ClickException as e:
            self._fail(e.format_message(), e.exit_code)
        except (click.exceptions.Abort, KeyboardInterrupt):
            self._fail("interrupted; nothing was left half-written", 130)
        except Interrupted as e:
            what = "interrupted" if e.signum == signal.SIGINT else f"stopped by signal {e.signum}"
            self._fail(f"{what}; nothing was left half-written", 128 + e.signum)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def invoke(self, ctx):
        """Runs the command; its warnings are printed after it, one line each, only when it succeeds."""
        import warnings

        from .errors import LmuEdgeError

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = super().invoke(ctx)
            except (
                click.exceptions.Exit,
                click.exceptions.Abort,
                click.ClickException,
                Interrupted,
                KeyboardInterrupt,
            ):
                raise
            except BrokenPipeError:  # e.g. "lmu-edge inspect --json | head": not an error
                sys.stderr.close()
                sys.exit(0)
            except LmuEdgeError as e:
                self._fail(e, 1)
            except OSError as e:
                self._fail(os_error_line(e), 1)
            except MemoryError as e:
                self._fail(f"{type(e).__name__}: {e}", 1)
            except Exception as e:  # a bug of ours: still one line, with the way to see more
                self._fail(
                    f"internal error ({type(e).__name__}: {e}); please report it with "
                    f"the command you ran (LMU_EDGE_DEBUG=1 shows the traceback)",
                    70,
                )
        seen = set()
        for w in caught:
            if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, ResourceWarning)):
                continue  # libraries' notes to developers (numpy.core in nengo, say), hidden as Python hides them
            msg = " ".join(str(w.message).split())
            if msg not in seen:
                seen.add(msg)
                click.echo(f"lmu-edge: warning: {msg}", err=True)
        return result

    @staticmethod
    def _fail(msg, code):
        if os.environ.get("LMU_EDGE_DEBUG") and isinstance(msg, BaseException):
            raise msg
        click.echo(f"lmu-edge: error: {' '.join(str(msg).split())}", err=True)
        sys.exit(code)


def os_error_line(e: OSError) -> str:
    """An operating system's error as the project's one line: the path, the reason, what to do."""
    from .errors import os_refusal

    where = f"{e.filename}: " if e.filename is not None else ""
    return f"{where}{e.strerror or e}; {os_refusal(e) or 'check the path'}"


class Finite(click.ParamType):
    """A finite float in a range (click's FloatRange accepts inf and nan)."""

    name = "number"

    def __init__(self, lo: float, hi: float, low_open: bool = False):
        self.lo, self.hi, self.low_open = lo, hi, low_open

    def convert(self, value, param, ctx):
        """``value`` as a float, or click's usage error naming the range."""
        import math

        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        bad_lo = v <= self.lo if self.low_open else v < self.lo
        if not math.isfinite(v) or bad_lo or v > self.hi:
            span = f"{'(' if self.low_open else '['}{self.lo:g}, {self.hi:g}]"
            self.fail(f"{value!r} is not a finite number in {span}", param, ctx)
        return v


BUDGET = Finite(0.0, 1.0, low_open=True)
TOLERANCE = Finite(0.0, 1e300)


def quiet_means_quiet(command):
    """Decorator (innermost, under click's) for a command with ``--quiet``: while it works, what native
    code writes straight to the stderr descriptor (TensorFlow's C++ logs, LiteRT's delegate notice) is
    dropped; what Python writes to ``sys.stderr`` (lmu-edge's FAIL and warning lines among it) still
    reaches the terminal through a copy of the descriptor. ``LMU_EDGE_DEBUG=1`` keeps everything, and a
    closed stderr is left as it is."""
    import functools

    @functools.wraps(command)
    def run(*args, **kwargs):
        if not kwargs.get("quiet") or os.environ.get("LMU_EDGE_DEBUG") or sys.stderr is None:
            return command(*args, **kwargs)
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError):  # no descriptor 2 (stderr closed): nothing to keep quiet
            return command(*args, **kwargs)
        ours, sys.stderr = sys.stderr, os.fdopen(os.dup(saved), "w", buffering=1, errors="backslashreplace")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        try:
            return command(*args, **kwargs)
        finally:
            sys.stderr.close()
            sys.stderr = ours
            os.dup2(saved, 2)
            os.close(saved)

    return run


def progress_printer(quiet):
    """The ``progress`` callback of the API for a command: messages to stderr, or None with ``--quiet``."""
    return None if quiet else (lambda msg: click.echo(msg, err=True))


def target_names():
    """The registered targets' names, sorted (``--target``'s choices)."""
    from .registry import TARGETS

    return sorted(TARGETS)
