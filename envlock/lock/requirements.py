"""requirements.txt with hashes: the same closure as pylock.toml, for pip."""

from __future__ import annotations

from envlock.lock.pylock import comment, describe, regenerate_command
from envlock.model import Lock

REQUIREMENTS = "requirements.txt"


def requirements_text(lock: Lock) -> str:
    header = [
        f"Made by envlock: {describe(lock)}.",
        f"Resolved with {lock.resolver} {lock.resolver_version} from: "
        + " ".join(lock.top_requirements),
        "Every package is pinned and every file checked against its sha256.",
        "",
        "Install into a fresh venv (nothing else is pulled in):",
        "  pip install --require-hashes --no-deps -r requirements.txt",
        "Regenerate (in this folder):",
        f"  {regenerate_command(lock)}",
        "Check it is current:",
        "  envlock lock --check .",
    ]
    lines = [comment(line) for line in header] + [""]
    for pkg in sorted(lock.packages, key=lambda p: p.name):
        hashes = sorted({w.sha256 for w in pkg.wheels})
        lines.append(f"{pkg.name}=={pkg.version} \\")
        for i, h in enumerate(hashes):
            end = " \\" if i < len(hashes) - 1 else ""
            lines.append(f"    --hash=sha256:{h}{end}")
    return "\n".join(lines) + "\n"
