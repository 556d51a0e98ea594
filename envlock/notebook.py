"""``%envlock``: envlock from inside a Jupyter notebook (``%load_ext envlock``).

This module and ``envlock/__init__.py`` are all a kernel imports: standard
library only, Python 3.8 or newer, so the kernel's environment gains no envlock
dependency and a capture of it stays clean. ``envlock notebook install --venv PY``
copies the two files into a folder of envlock's data dir and names that folder
in a ``.pth`` file of PY's site-packages (no dist-info: pip freeze and capture do
not see it), with the envlock executable that installed it recorded beside them.

``%envlock COMMAND ...`` runs that envlock, outside the kernel, with the line
split as a shell would (shlex; ``~`` is the home folder; ``# ...`` a comment).
For the commands that inspect or change the kernel's own environment (capture,
doctor, restore --in-place/--undo, smoke --host, notebook install/uninstall)
``--venv sys.executable`` is added unless the line names a target itself
(``--venv``, or smoke's old ``--python``). In a kernel the output is shown as
HTML (envlock's ENVLOCK_FORMAT=html), elsewhere as text; progress on stderr is
shown as it comes. The exit status is ``_envlock_exit`` in the user's namespace
(as IPython's ``_exit_code`` after ``!cmd``) and the whole result ``_envlock``;
a status other than 0 is also printed. Nothing is raised.

Which envlock runs, first found: ``%envlock --use PATH`` (for this session),
``$ENVLOCK_BIN``, the one ``envlock notebook install`` recorded, envlock's own
console script when this is the real package, ``envlock`` on PATH.

A line may start with the word ``envlock``: every command envlock prints works in
a cell with ``%`` in front of it.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

CONFIG = "notebook.json"  # beside this file in an installed shim: {"envlock": [argv...]}
ENV_BIN = "ENVLOCK_BIN"
EXIT_NOT_FOUND = 127  # as a shell says for a command it cannot find
_FRAGMENT = '<div class="envlock">'  # how ENVLOCK_FORMAT=html output starts

MEANINGS = {1: "a check failed", 2: "bad input", 3: "the environment failed", 130: "interrupted"}

# The commands that act on an environment, and the flag that names it.
_TARGET_FLAG = {"capture": "--venv", "doctor": "--venv", "restore": "--venv", "smoke": "--venv"}


class NotFound(Exception):
    """No envlock executable to run; the message says where envlock looked and the fix."""


class Result:
    """One ``%envlock`` run: the command, its exit status and what it printed."""

    def __init__(self, argv: list[str], exit_code: int, stdout: str, stderr: str) -> None:
        self.argv = argv
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def __repr__(self) -> str:
        return f"<envlock {shlex.join(self.argv[1:])!s}: exit {self.exit_code}>"


def _given(args: list[str], *names: str) -> bool:
    """Whether one of the options ``names`` is on the line (``--x V``, ``--x=V``, ``-rV``)."""
    for arg in args:
        if arg == "--":
            return False
        for name in names:
            if arg == name or arg.startswith(name + "="):
                return True
            if len(name) == 2 and not arg.startswith("--") and arg.startswith(name):
                return True
    return False


def _value(args: list[str], name: str) -> str | None:
    """The value of the long option ``name`` on the line (``--x V`` or ``--x=V``), else None."""
    for at, arg in enumerate(args):
        if arg == "--":
            break
        if arg == name and at + 1 < len(args):
            return args[at + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None


def next_step(args: list[str]) -> str | None:
    """After a restore that registered a kernel in a new venv: the line that makes
    ``%load_ext envlock`` work in that kernel too (None when the venv is not named
    on the line: restore chose it)."""
    if args[:1] != ["restore"] or not _given(args, "--kernel") or _given(args, "--json"):
        return None
    venv = _value(args, "--venv")
    if not venv:
        return None
    kernel = _value(args, "--kernel")
    line = shlex.join(["%envlock", "notebook", "install", "--venv", venv])
    return f"to use %envlock in the kernel {kernel} too, run here: {line}"


def with_target(args: list[str], python: str) -> list[str]:
    """``args`` with the kernel's interpreter named where the command acts on an
    environment and the line names none (``--venv`` right after the command's name;
    smoke's old name ``--python`` counts as one), and doctor told it runs in a
    notebook (``--notebook``: its fixes are cell lines); every other line as it is."""
    if not args or _given(args, "-h", "--help"):
        return list(args)
    targeted = _with_venv(args, python)
    if args[0] == "doctor" and not _given(args[1:], "--notebook"):
        targeted.append("--notebook")
    return targeted


def _with_venv(args: list[str], python: str) -> list[str]:
    command, rest = args[0], list(args[1:])
    flag = _TARGET_FLAG.get(command)
    if command == "notebook" and rest[:1] in (["install"], ["uninstall"]):
        if _given(rest, "--venv"):
            return list(args)
        return [command, rest[0], "--venv", python, *rest[1:]]
    named = ("--venv", "--python") if command == "smoke" else ("--venv",)
    if flag is None or _given(rest, *named):
        return list(args)
    if command == "capture" and _given(rest, "-r", "--requirement"):
        return list(args)  # a pip freeze is the input, not an environment
    if command == "doctor" and _given(rest, "--freeze"):
        return list(args)  # a published package list is the environment, not the kernel
    if command == "doctor" and _given(rest, "--log") and not _given(rest, "--lock"):
        return list(args)  # only a log to explain: no environment is probed
    if command == "restore" and not _given(rest, "--in-place", "--undo"):
        return list(args)  # a new venv (DIR/.venv or --venv), not the kernel's
    if command == "smoke" and not _given(rest, "--host"):
        return list(args)  # an image
    return [command, flag, python, *rest]


def _uncommented(line: str) -> str:
    """``line`` up to a ``#`` that starts a word outside quotes, as a shell reads it
    (shlex's comments=True would also cut ``a#b``)."""
    quote, escaped, word_start = "", False, True
    for at, char in enumerate(line):
        if escaped:
            escaped, word_start = False, False
        elif char == "\\" and quote != "'":
            escaped, word_start = True, False
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote, word_start = char, False
        elif char.isspace():
            word_start = True
        elif char == "#" and word_start:
            return line[:at]
        else:
            word_start = False
    return line


def _home(word: str) -> str:
    """A word that starts with ``~`` or ``~user`` with the home folder in its place,
    as a shell does (shlex does not)."""
    return os.path.expanduser(word) if word.startswith("~") else word


def _runnable(argv: list[str]) -> list[str] | None:
    """``argv`` with its program found (a path that is an executable file, or a
    name on PATH), else None."""
    if not argv:
        return None
    program = argv[0]
    if os.sep in program:
        path = os.path.abspath(os.path.expanduser(program))  # the kernel may change folder
        return [path, *argv[1:]] if os.path.isfile(path) and os.access(path, os.X_OK) else None
    found = shutil.which(program)
    return [found, *argv[1:]] if found else None


def _recorded(here: Path) -> list[str] | None:
    try:
        doc = json.loads((here / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    argv = doc.get("envlock") if isinstance(doc, dict) else None
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        return argv
    return None


def _own_console_script(here: Path) -> list[str] | None:
    """The real envlock package (not the copied shim): the envlock beside its interpreter."""
    if not (here / "cli.py").is_file():
        return None
    script = Path(sys.executable).parent / "envlock"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "envlock"]


def fix_hint(python: str) -> str:
    """What to do when no envlock is found: a command for a shell (or a ``!`` cell)."""
    install = shlex.join(["envlock", "notebook", "install", "--venv", python])
    return (
        f"install envlock (the distribution envlock-gpu; 'envlock' on the index is another "
        f"project) outside this kernel (its own venv, pipx) and run, in a shell where "
        f"it is on PATH: {install} (it records which envlock %envlock runs); or name it "
        f"for this session with %envlock --use followed by its path, or set {ENV_BIN}"
    )


def find_envlock(
    use: list[str] | None, environ: dict[str, str] | os._Environ[str], here: Path, python: str
) -> tuple[list[str], str]:
    """(the envlock command to run, where it was named); NotFound when none."""
    candidates: list[tuple[str, list[str] | None]] = [("%envlock --use", use)]
    if environ.get(ENV_BIN):
        try:
            candidates.append((f"${ENV_BIN}", shlex.split(environ[ENV_BIN])))
        except ValueError as e:
            raise NotFound(
                f"envlock: error: {ENV_BIN}={environ[ENV_BIN]!r}: {e}\n"
                "  hint: quote it as in a shell, or give the path of an envlock"
            ) from None
    candidates.append((f"envlock notebook install ({here / CONFIG})", _recorded(here)))
    for source, argv in candidates:
        if argv is None:
            continue
        found = _runnable(argv)
        if found is None:
            raise NotFound(
                f"envlock: error: {shlex.join(argv)} (named by {source}) is not an executable "
                f"file\n  hint: {fix_hint(python)}"
            )
        return found, source
    own = _own_console_script(here)
    if own is not None:
        return own, "envlock's own interpreter"
    on_path = shutil.which("envlock", path=environ.get("PATH"))
    if on_path:
        return [on_path], "PATH"
    raise NotFound(
        "envlock: error: no envlock to run: none named by %envlock --use, "
        f"${ENV_BIN} or envlock notebook install, and none on PATH\n  hint: {fix_hint(python)}"
    )


def run(
    argv: list[str],
    *,
    html: bool,
    environ: dict[str, str] | os._Environ[str] | None = None,
    err: Any = None,
) -> Result:
    """Run ``argv`` (an envlock command line), stderr passed on to ``err`` as it
    comes, stdout kept whole (one HTML fragment under ``html``)."""
    env = dict(os.environ if environ is None else environ)
    env["ENVLOCK_FORMAT"] = "html" if html else "text"
    if not html and "COLUMNS" not in env and _isatty(sys.stdout):
        # IPython in a terminal: envlock's stdout is a pipe, its tables would fit 100
        env["COLUMNS"] = str(shutil.get_terminal_size().columns)
    err = sys.stderr if err is None else err
    out: list[str] = []
    errors: list[str] = []
    with subprocess.Popen(  # closes both pipes when done
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        encoding="utf-8",
        errors="replace",
    ) as proc:
        stdout, stderr = proc.stdout, proc.stderr
        assert stdout is not None and stderr is not None
        reader = threading.Thread(target=lambda: out.append(stdout.read()), daemon=True)
        reader.start()
        try:
            for line in stderr:
                errors.append(line)
                err.write(line)
                err.flush()
            code = proc.wait()
        except KeyboardInterrupt:  # the kernel's interrupt: stop envlock as Ctrl-C would
            proc.send_signal(2)
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        reader.join()
    return Result(argv, code, "".join(out), "".join(errors))


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _in_kernel(shell: Any) -> bool:
    """Whether output can be shown as HTML: a Jupyter kernel's shell with IPython.display."""
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    try:
        importlib.import_module("IPython.display")
    except ImportError:
        return False
    return True


def _show_html(fragment: str) -> None:
    shown = importlib.import_module("IPython.display")
    shown.display(shown.HTML(fragment))


class Magic:
    """%envlock COMMAND [ARGS...]: envlock, installed outside this kernel, run on
    this kernel's interpreter; the output shown as HTML.

      %envlock capture -o ~/env            lock what is installed (before an upgrade)
      %envlock doctor --lock ~/env         what drifted, and the fixes
      %envlock restore ~/env --in-place    the locked versions back here (then restart)
      %envlock restore ~/env --undo        what --in-place replaced, back (offline)
      %envlock restore ~/env --kernel tf215 --venv ~/envs/tf215   a new venv as a kernel
      %envlock --use /path/to/envlock      the envlock to run, for this session
      %envlock --help                      every command

    ``--venv <this interpreter>`` is added to capture, doctor, restore --in-place
    and --undo, smoke --host and notebook install/uninstall unless
    the line names a target. The exit status is in ``_envlock_exit``, the result
    (argv, exit_code, stdout, stderr) in ``_envlock``. See docs/notebook.md.
    """

    def __init__(
        self,
        shell: Any = None,
        *,
        html: bool | None = None,
        show_html: Callable[[str], None] | None = None,
        environ: dict[str, str] | os._Environ[str] | None = None,
        here: Path | None = None,
        python: str | None = None,
    ) -> None:
        self.shell = shell
        self.html = _in_kernel(shell) if html is None else html
        self.show_html = show_html or _show_html
        self.environ = os.environ if environ is None else environ
        self.here = here or Path(__file__).resolve().parent
        self.python = python or sys.executable
        self.use: list[str] | None = None

    def _done(self, result: Result | None, code: int) -> None:
        ns = getattr(self.shell, "user_ns", None)
        if isinstance(ns, dict):
            ns["_envlock_exit"] = code
            ns["_envlock"] = result

    def __call__(self, line: str) -> None:
        try:
            args = shlex.split(_uncommented(line))
        except ValueError as e:
            sys.stderr.write(f"envlock: error: %envlock {line}: {e}\n  hint: quote as in a shell\n")
            return self._done(None, 2)
        args = [_home(a) for a in args]
        if args[:1] == ["envlock"]:  # a command envlock printed, with % put in front
            args = args[1:]
        if args[:1] == ["--use"] or (args and args[0].startswith("--use=")):
            value = args[1] if args[0] == "--use" and len(args) > 1 else args[0][6:]
            if not value:
                sys.stderr.write("envlock: error: --use needs the path of an envlock\n")
                return self._done(None, 2)
            use = shlex.split(value)
            if _runnable(use) is None:
                sys.stderr.write(
                    f"envlock: error: --use {value}: not an executable file\n"
                    f"  hint: {fix_hint(self.python)}\n"
                )
                return self._done(None, 2)
            self.use = _runnable(use)
            args = args[2:] if args[0] == "--use" else args[1:]
            if not args:
                sys.stdout.write(f"%envlock runs {shlex.join(self.use or use)} in this session\n")
                return self._done(None, 0)
        try:
            command, _ = find_envlock(self.use, self.environ, self.here, self.python)
        except NotFound as e:
            sys.stderr.write(f"{e}\n")
            return self._done(None, EXIT_NOT_FOUND)
        argv = [*command, *(with_target(args, self.python) if args else ["--help"])]
        try:
            result = run(argv, html=self.html, environ=self.environ)
        except OSError as e:  # not a program this machine runs (a script for another one)
            sys.stderr.write(
                f"envlock: error: cannot run {shlex.join(command)}: {e.strerror or e}\n"
                f"  hint: {fix_hint(self.python)}\n"
            )
            return self._done(None, EXIT_NOT_FOUND)
        text = result.stdout
        if self.html and text.lstrip().startswith(_FRAGMENT):
            if text.strip() != _FRAGMENT + "\n</div>":  # an empty one: nothing to show
                self.show_html(text)
        elif text:  # --json, --help and text mode
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()
        step = next_step(args) if result.exit_code == 0 else None
        if step:
            sys.stdout.write(step + "\n")
        if result.exit_code != 0:
            meaning = MEANINGS.get(result.exit_code)
            sys.stderr.write(
                f"envlock exited with status {result.exit_code}"
                + (f" ({meaning})" if meaning else "")
                + "\n"
            )
        return self._done(result, result.exit_code)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext envlock``: register the ``%envlock`` line magic."""
    magic = Magic(ipython)
    ipython.register_magic_function(magic, magic_kind="line", magic_name="envlock")
