"""The %envlock extension (envlock/notebook.py) and envlock notebook install|uninstall.

Without IPython: the magic is driven through ``Magic`` with a stand-in shell (a
``user_ns`` dict) and a list collecting what would be shown as HTML; the envlock
it runs is the real CLI (a subprocess) or a small script that prints what it was
given. The real kernels are in test_notebook_kernel.py.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envlock import notebook
from envlock.cli import main
from envlock.notebook import Magic, with_target
from envlock.venv import notebook_install as notebook_cmd

ROOT = Path(__file__).resolve().parent.parent
ENVLOCK = str(Path(sys.executable).parent / "envlock")  # the test venv's console script
KERNEL = "/opt/kernel/bin/python"


class Shell:
    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {}
        self.magics: dict[str, Any] = {}

    def register_magic_function(self, func: Any, magic_kind: str, magic_name: str) -> None:
        self.magics[(magic_kind, magic_name)] = func


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("capture -o env", f"capture --venv {KERNEL} -o env"),
        ("doctor --lock env", f"doctor --venv {KERNEL} --lock env --notebook"),
        ("doctor", f"doctor --venv {KERNEL} --notebook"),
        ("capture -o env --python 3.11", f"capture --venv {KERNEL} -o env --python 3.11"),
        ("restore env --in-place", f"restore --venv {KERNEL} env --in-place"),
        ("restore env --undo --undo-id 3", f"restore --venv {KERNEL} env --undo --undo-id 3"),
        ("smoke --host --allow-cpu", f"smoke --venv {KERNEL} --host --allow-cpu"),
        ("notebook install", f"notebook install --venv {KERNEL}"),
        ("notebook uninstall --json", f"notebook uninstall --venv {KERNEL} --json"),
        (
            "doctor --log train.log --lock env",
            f"doctor --venv {KERNEL} --log train.log --lock env --notebook",
        ),
        # a target named on the line, or a command that does not act on this environment
        ("capture --venv /other/python -o env", None),
        ("capture --venv=/other -o env", None),
        ("capture -r freeze.txt -o env", None),
        ("capture -rfreeze.txt -o env", None),
        ("capture --requirement=freeze.txt -o env", None),
        # doctor is told it runs in a notebook: its fixes are cell lines (#42)
        ("doctor --log train.log", "doctor --log train.log --notebook"),
        ("doctor --venv /other/python --notebook", None),
        ("doctor --venv /other/python", "doctor --venv /other/python --notebook"),
        ("restore env", None),
        ("restore env --kernel tf215 --venv /envs/tf215", None),
        ("restore env --kernel tf215", None),
        ("restore env --in-place --venv /other/python", None),
        ("smoke myimage:1", None),
        ("smoke --host --python /other/python", None),  # the old name of --venv
        ("smoke --host --venv /other/python", None),
        ("notebook install --venv /other/python", None),
        ("doctor --help", None),
        ("capture -h", None),
        ("resolve tensorflow==2.15", None),
        ("lock tensorflow==2.15 -o env", None),
        ("restore -- --in-place", None),
    ],
)
def test_the_kernels_interpreter_is_named_where_the_command_acts_on_it(
    line: str, want: str | None
) -> None:
    args = shlex.split(line)
    assert with_target(args, KERNEL) == shlex.split(want if want is not None else line)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("doctor --lock env   # what changed", ["doctor", "--lock", "env"]),
        ("doctor --lock 'my # env' # note", ["doctor", "--lock", "my # env"]),
        ('doctor --lock "a \\" #b" x', ["doctor", "--lock", 'a " #b', "x"]),
        ("resolve --index-url http://h/s#frag", ["resolve", "--index-url", "http://h/s#frag"]),
        ("doctor --lock a\\ #b", ["doctor", "--lock", "a #b"]),
        ("# only a comment", []),
    ],
)
def test_a_line_is_split_as_a_shell_splits_it(line: str, words: list[str]) -> None:
    assert shlex.split(notebook._uncommented(line)) == words


@pytest.mark.parametrize(
    ("line", "step"),
    [
        (
            "restore env --kernel tf215 --venv '/envs/tf 215'",
            "to use %envlock in the kernel tf215 too, run here: "
            "%envlock notebook install --venv '/envs/tf 215'",
        ),
        (
            "restore env --kernel=tf215 --venv=/envs/tf215",
            "to use %envlock in the kernel tf215 too, run here: "
            "%envlock notebook install --venv /envs/tf215",
        ),
        ("restore env --kernel tf215", None),  # restore chose the venv: not known here
        ("restore env --kernel tf215 --venv /envs/tf215 --json", None),
        ("restore env --venv /envs/tf215", None),
        ("doctor --venv /envs/tf215", None),
    ],
)
def test_a_kernel_restore_says_how_to_load_the_extension_there(line: str, step: str | None) -> None:
    assert notebook.next_step(shlex.split(line)) == step


@pytest.fixture
def fake_envlock(tmp_path: Path) -> Path:
    """An envlock that prints its arguments and ENVLOCK_FORMAT on stdout, a
    progress line on stderr, and exits with $FAKE_EXIT."""
    script = tmp_path / "fake-envlock"
    script.write_text(
        "#!/bin/sh\n"
        'echo "progress: working" >&2\n'
        'for a in "$@"; do printf \'%s\\n\' "$a"; done\n'
        'echo "format=$ENVLOCK_FORMAT"\n'
        'exit "${FAKE_EXIT:-0}"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def test_the_line_runs_the_named_envlock_with_the_kernels_interpreter(
    fake_envlock: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shell, shown = Shell(), []
    environ = {"PATH": os.environ["PATH"], "FAKE_EXIT": "3"}
    magic = Magic(shell, html=False, show_html=shown.append, environ=environ, python=KERNEL)
    magic(f"--use {fake_envlock} doctor --lock 'my env'")
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        *("doctor", "--venv", KERNEL, "--lock", "my env", "--notebook", "format=text")
    ]
    assert err == "progress: working\nenvlock exited with status 3 (the environment failed)\n"
    assert shown == []
    assert shell.user_ns["_envlock_exit"] == 3
    result = shell.user_ns["_envlock"]
    assert result.argv == [
        *(str(fake_envlock), "doctor", "--venv", KERNEL, "--lock", "my env", "--notebook")
    ]
    assert result.stderr == "progress: working\n" and not result.ok
    # ~ is the home folder, as in a shell
    magic(f"--use {fake_envlock} capture -o ~/env   # a comment, as in a shell")
    out, err = capsys.readouterr()
    home = os.path.expanduser("~")
    assert out.splitlines() == ["capture", "--venv", KERNEL, "-o", f"{home}/env", "format=text"]
    # --use is remembered for the session; a pasted command keeps its own --venv
    environ["FAKE_EXIT"] = "0"
    magic("envlock restore env --undo --venv /other/python")
    out, err = capsys.readouterr()
    assert out.splitlines()[:5] == ["restore", "env", "--undo", "--venv", "/other/python"]
    assert err == "progress: working\n" and shell.user_ns["_envlock_exit"] == 0


def test_in_a_terminal_the_text_fits_its_width(
    fake_envlock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """IPython in a terminal: envlock writes to a pipe, so COLUMNS carries the width."""
    script = fake_envlock.with_name("columns")
    script.write_text('#!/bin/sh\necho "columns=${COLUMNS-unset}"\n', encoding="utf-8")
    script.chmod(0o755)

    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(notebook.shutil, "get_terminal_size", lambda: os.terminal_size((132, 40)))
    for stdout, environ, want in [
        (Tty(), {}, "columns=132\n"),
        (Tty(), {"COLUMNS": "90"}, "columns=90\n"),  # the user's setting stays
        (sys.stdout, {}, "columns=unset\n"),  # not a terminal: envlock's own default
    ]:
        monkeypatch.setattr(notebook.sys, "stdout", stdout)
        result = notebook.run([str(script)], html=False, environ=environ)
        assert result.stdout == want
    monkeypatch.undo()
    html = notebook.run([str(script)], html=True, environ={})
    assert html.stdout == "columns=unset\n"  # HTML: nothing to fit


def test_envlock_bin_names_the_envlock_and_a_bad_one_is_named_with_the_fix(
    fake_envlock: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shell = Shell()
    environ = {"PATH": str(tmp_path / "empty"), "ENVLOCK_BIN": f"{fake_envlock} --flag"}
    Magic(shell, html=False, environ=environ, here=tmp_path, python=KERNEL)("doctor")
    assert capsys.readouterr().out.splitlines()[:3] == ["--flag", "doctor", "--venv"]
    environ["ENVLOCK_BIN"] = str(tmp_path / "nowhere" / "envlock")
    Magic(shell, html=False, environ=environ, here=tmp_path, python=KERNEL)("doctor")
    out, err = capsys.readouterr()
    assert out == ""
    first, hint = err.splitlines()
    assert first == (
        f"envlock: error: {tmp_path}/nowhere/envlock (named by $ENVLOCK_BIN) is not an "
        "executable file"
    )
    assert f"envlock notebook install --venv {KERNEL}" in hint
    assert shell.user_ns["_envlock_exit"] == notebook.EXIT_NOT_FOUND


def test_an_envlock_that_does_not_run_is_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shell = Shell()
    broken = tmp_path / "envlock"
    broken.write_bytes(b"\x7fELF not really")  # executable, but no program
    broken.chmod(0o755)
    Magic(shell, html=True, environ={"PATH": ""}, python=KERNEL)(f"--use {broken} doctor")
    first, hint = capsys.readouterr().err.splitlines()
    assert first.startswith(f"envlock: error: cannot run {broken}: Exec format error")
    assert f"envlock notebook install --venv {KERNEL}" in hint
    assert shell.user_ns["_envlock_exit"] == 127
    environ = {"PATH": "", "ENVLOCK_BIN": "'/opt/env lock"}
    Magic(shell, html=True, environ=environ, here=tmp_path, python=KERNEL)("doctor")
    assert capsys.readouterr().err.splitlines()[0] == (
        'envlock: error: ENVLOCK_BIN="\'/opt/env lock": No closing quotation'
    )


@pytest.mark.venv
def test_no_envlock_anywhere_is_one_message_whose_command_installs_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = _bare_venv(tmp_path / "kernel")
    shell = Shell()
    environ = {"PATH": str(tmp_path / "empty")}
    Magic(shell, html=True, environ=environ, here=tmp_path, python=str(kernel))("doctor")
    out, err = capsys.readouterr()
    assert out == "" and shell.user_ns["_envlock_exit"] == 127
    first, hint = err.splitlines()
    assert first == (
        "envlock: error: no envlock to run: none named by %envlock --use, $ENVLOCK_BIN or "
        "envlock notebook install, and none on PATH"
    )
    # the hint's command, pasted into a shell where envlock is on PATH, makes %envlock work
    command = hint.split("it is on PATH: ", 1)[1].split(" (it records", 1)[0]
    assert command == f"envlock notebook install --venv {kernel}"
    data = tmp_path / "data"
    env = {**os.environ, "XDG_DATA_HOME": str(data), "PATH": f"{Path(ENVLOCK).parent}:/usr/bin"}
    done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [folder] = data.glob("envlock/notebook/*/envlock")
    recorded = json.loads((folder / "notebook.json").read_text(encoding="utf-8"))
    assert recorded["envlock"] == [ENVLOCK]
    # the copy's magic (here: the installed folder) finds the recorded envlock, no PATH
    shown: list[str] = []
    magic = Magic(shell, html=True, show_html=shown.append, environ=environ, here=folder)
    magic("resolve tensorflow==2.15.1")
    out, err = capsys.readouterr()
    assert shell.user_ns["_envlock_exit"] == 0, err
    assert out == "" and len(shown) == 1
    assert shown[0].startswith('<div class="envlock">\n') and '<table class="envlock">' in shown[0]
    cell = '<td style="text-align:left;vertical-align:top;white-space:pre-wrap">'
    assert f"{cell}release</td>{cell}tensorflow 2.15.1</td>" in shown[0]


def test_text_outside_a_kernel_and_html_in_one(capsys: pytest.CaptureFixture[str]) -> None:
    shell, shown = Shell(), []
    text = Magic(shell, environ=dict(os.environ), show_html=shown.append)  # no kernel: text
    assert text.html is False
    text(f"--use {ENVLOCK} resolve tensorflow==2.15.1")
    out, _ = capsys.readouterr()
    assert shown == [] and "<" not in out and "tensorflow" in out and "2.15.1" in out
    html = Magic(shell, html=True, environ=dict(os.environ), show_html=shown.append)
    html(f"--use {ENVLOCK} resolve tensorflow==2.15.1")
    out, _ = capsys.readouterr()
    assert out == "" and len(shown) == 1 and "<table" in shown[0]
    # --json is JSON whatever the format: printed as it is
    html(f"--use {ENVLOCK} resolve tensorflow==2.15.1 --json")
    out, _ = capsys.readouterr()
    assert len(shown) == 1 and json.loads(out)["version"] == "2.15.1"
    # a failed command: its message on stderr, nothing shown, the status printed
    html(f"--use {ENVLOCK} restore /nonexistent/env --in-place")
    out, err = capsys.readouterr()
    assert out == "" and len(shown) == 1
    assert err.startswith("envlock: error: ") and "Traceback" not in err
    assert err.endswith("envlock exited with status 2 (bad input)\n")
    assert shell.user_ns["_envlock"].argv[1:5] == [
        "restore",
        "--venv",
        sys.executable,
        "/nonexistent/env",
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("doctor --lock 'env", "envlock: error: %envlock doctor --lock 'env: No closing quotation"),
        ("--use", "envlock: error: --use needs the path of an envlock"),
        (
            "--use /no/such/envlock doctor",
            "envlock: error: --use /no/such/envlock: not an executable file",
        ),
    ],
)
def test_a_line_that_cannot_run_is_exit_2_with_its_reason(
    line: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shell = Shell()
    Magic(shell, html=False, environ={"PATH": ""})(line)
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines()[0] == message
    assert shell.user_ns["_envlock_exit"] == 2


def test_use_alone_says_which_envlock_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shell = Shell()
    magic = Magic(shell, html=False, environ={"PATH": ""})
    monkeypatch.chdir(Path(ENVLOCK).parent)
    magic("--use ./envlock")  # kept as an absolute path: the kernel may change folder
    monkeypatch.chdir("/")
    assert capsys.readouterr().out == f"%envlock runs {ENVLOCK} in this session\n"
    magic("--version")
    assert capsys.readouterr().out == "envlock 0.1.0\n"


def test_load_ext_registers_the_line_magic() -> None:
    shell = Shell()
    import envlock

    envlock.load_ipython_extension(shell)
    magic = shell.magics[("line", "envlock")]
    assert isinstance(magic, Magic) and magic.shell is shell and magic.html is False


def test_the_extension_is_python_38_syntax_and_imports_nothing_outside_the_stdlib() -> None:
    for name in ("__init__.py", "notebook.py"):
        source = (ROOT / "envlock" / name).read_text(encoding="utf-8")
        ast.parse(source, filename=name, feature_version=(3, 8))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module:
                top = node.module.split(".")[0]
                assert top in sys.stdlib_module_names or top == "envlock", (name, node.module)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in sys.stdlib_module_names, (name, alias.name)


def _bare_venv(path: Path) -> Path:
    """A venv without pip or anything else (uv venv): what a kernel's interpreter might be."""
    from envlock.lock.uv import uv_bin

    subprocess.run([str(uv_bin()), "venv", "-q", "--python", sys.executable, str(path)], check=True)
    return path / "bin" / "python"


_IN_KERNEL = r"""
import importlib.metadata, json, sys
import envlock
class Shell:
    user_ns = {}
    def register_magic_function(self, func, magic_kind, magic_name):
        self.registered = (magic_kind, magic_name, type(func).__name__)
shell = Shell()
envlock.load_ipython_extension(shell)
outside = sorted(m for m in sys.modules if m.split(".")[0] not in sys.stdlib_module_names
                 and m.split(".")[0] not in ("__main__", "envlock", "sitecustomize", "_virtualenv"))
print(json.dumps({"file": envlock.__file__, "registered": shell.registered, "outside": outside,
                  "dists": [d.metadata["Name"] for d in importlib.metadata.distributions()]}))
"""


@pytest.mark.venv
def test_install_makes_the_extension_importable_without_a_distribution_and_uninstall_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    kernel = _bare_venv(tmp_path / "kernel")
    assert main(["notebook", "install", "--venv", str(kernel), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    site = tmp_path / "kernel" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    pth = site / "site-packages" / "envlock-notebook.pth"
    assert doc["pth"] == str(pth) and doc["envlock"] == [ENVLOCK]
    folder = Path(doc["folder"])
    assert pth.read_text(encoding="utf-8") == f"{folder.parent}\n"
    assert folder.parent.parent == tmp_path / "data" / "envlock" / "notebook"
    for name in ("__init__.py", "notebook.py"):
        assert (folder / name).read_bytes() == (ROOT / "envlock" / name).read_bytes()
    ran = subprocess.run(
        [str(kernel), "-c", _IN_KERNEL], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    found = json.loads(ran.stdout)
    assert found == {
        "file": str(folder / "__init__.py"),
        "registered": ["line", "envlock", "Magic"],
        "outside": [],
        "dists": [],  # no dist-info: pip freeze and capture see nothing
    }
    # installing again replaces the copy in place; uninstall removes the .pth and the folder
    assert main(["notebook", "install", "--venv", str(tmp_path / "kernel")]) == 0
    out = capsys.readouterr().out
    assert "in a notebook on this interpreter's kernel, run: %load_ext envlock" in out
    assert main(["notebook", "uninstall", "--venv", str(kernel)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"{kernel.absolute()}: the extension removed",
        f"  - {pth}",
        f"  - {folder.parent}",
    ]
    assert not pth.exists() and not folder.parent.exists()
    gone = subprocess.run(
        [str(kernel), "-c", "import envlock"], capture_output=True, text=True, cwd=tmp_path
    )
    assert gone.returncode == 1 and "No module named 'envlock'" in gone.stderr
    assert main(["notebook", "uninstall", "--venv", str(kernel)]) == 0
    assert "not installed there; nothing removed" in capsys.readouterr().out


def _oldest_python() -> str | None:
    """CPython 3.8 from pyenv (the oldest the extension supports), if installed."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = sorted(root.glob("3.8.*"), key=lambda p: [int(x) for x in p.name.split(".")[1:]])
    return str(found[-1] / "bin" / "python") if found else None


_RUN_MAGIC = r"""
import envlock
class Shell:
    user_ns = {}
    def register_magic_function(self, func, magic_kind, magic_name):
        self.magic = func
shell = Shell()
envlock.load_ipython_extension(shell)
shell.magic("--version   # which envlock")
shell.magic("doctor --lock /nonexistent/env")
print("exits", shell.user_ns["_envlock_exit"], shell.user_ns["_envlock"].argv[1:4])
"""


@pytest.mark.venv
@pytest.mark.other_python
def test_the_installed_extension_runs_under_python_38(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    python = _oldest_python()
    if python is None:
        pytest.skip("no CPython 3.8 under pyenv (~/.pyenv/versions/3.8.*)")
    from envlock.lock.uv import uv_bin

    venv = tmp_path / "py38"
    subprocess.run([str(uv_bin()), "venv", "-q", "--python", python, str(venv)], check=True)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["notebook", "install", "--venv", str(venv)]) == 0
    assert "Python 3.8." in capsys.readouterr().out
    env = {"PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(tmp_path / "data")}
    ran = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _RUN_MAGIC],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "envlock 0.1.0",
        f"exits 2 ['doctor', '--venv', '{venv / 'bin' / 'python'}']",
    ]
    assert ran.stderr.splitlines()[0] == (
        "envlock: error: --lock /nonexistent/env: no pylock.toml there"
    )


def test_install_refuses_what_is_no_interpreter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["notebook", "install", "--venv", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"envlock: error: --venv {tmp_path / 'nothing'}: ") and "hint:" in err


@pytest.mark.venv
def test_install_survives_a_banner_and_never_writes_through_a_planted_pth_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, break 10: an interpreter whose start-up prints a banner gave a
    JSONDecodeError traceback; a .pth planted as a link in a shared kernel
    environment was written through (the file it named was overwritten)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    kernel = _bare_venv(tmp_path / "kernel")
    banner = tmp_path / "kernel" / "bin" / "python-banner"
    banner.write_text(f'#!/bin/sh\necho "Welcome to the platform image!"\nexec {kernel} "$@"\n')
    banner.chmod(0o755)
    site = next((tmp_path / "kernel" / "lib").glob("python3.*/site-packages"))
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    (site / "envlock-notebook.pth").symlink_to(victim)
    assert main(["notebook", "install", "--venv", str(banner), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    pth = site / "envlock-notebook.pth"
    assert doc["pth"] == str(pth) and not pth.is_symlink()
    assert pth.read_text() == f"{Path(doc['folder']).parent}\n"
    assert victim.read_text() == "mine\n"
    # an interpreter that prints no JSON at all: exit 3 naming it, no traceback
    mute = tmp_path / "mute"
    mute.write_text("#!/bin/sh\necho 'only a banner'\n")
    mute.chmod(0o755)
    assert main(["notebook", "install", "--venv", str(mute)]) == 3
    err = capsys.readouterr().err
    assert err.startswith(
        f"envlock: error: {mute}: reading its site-packages: printed no JSON document "
        "(its last line: only a banner)\n"
    ), err
    assert "Traceback" not in err


def test_a_relative_xdg_data_home_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The XDG Base Directory spec: a relative path is invalid and ignored. A .pth
    naming a relative folder names another one in every process started elsewhere."""
    monkeypatch.setenv("HOME", "/home/u")
    environ = {"XDG_DATA_HOME": "rel/data"}
    assert notebook_cmd.data_home(environ) == Path("/home/u/.local/share/envlock/notebook")
    environ = {"XDG_DATA_HOME": "/srv/data"}
    assert notebook_cmd.data_home(environ) == Path("/srv/data/envlock/notebook")


@pytest.mark.venv
def test_install_never_writes_the_extension_through_a_planted_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: files envlock puts in shared places are not written through links.
    The extension's own files went through atomic_write, which replaces the file a
    link names; a link at the extension's folder was written into. Now a link at a
    file is replaced, and one at the folder is exit 3 with nothing written."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    kernel = _bare_venv(tmp_path / "kernel")
    assert main(["notebook", "install", "--venv", str(kernel), "--json"]) == 0
    package = Path(json.loads(capsys.readouterr().out)["folder"])
    victim = tmp_path / "victim.py"
    victim.write_text("mine\n")
    (package / "__init__.py").unlink()
    (package / "__init__.py").symlink_to(victim)
    assert main(["notebook", "install", "--venv", str(kernel), "--json"]) == 0
    capsys.readouterr()
    assert not (package / "__init__.py").is_symlink() and victim.read_text() == "mine\n"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    import shutil

    shutil.rmtree(package)
    package.symlink_to(elsewhere)
    assert main(["notebook", "install", "--venv", str(kernel)]) == 3
    err = capsys.readouterr().err
    assert err.startswith(
        f"envlock: error: {package} is a symbolic link (to {elsewhere}); envlock does not "
        "write the extension through it, nothing was written\n"
    ), err
    assert list(elsewhere.iterdir()) == []
