"""``envlock doctor`` as one call: ``run_doctor(DoctorRequest, verbose=...)``: the
venv probed (``envlock.doctor.runner.diagnose``) or, with ``freeze``/``python``, a
package list judged (``envlock.doctor.platform.diagnose_freeze``). The result's
``to_dict`` is the report (schema ``envlock.doctor/v1``), ``text`` the fix list
(``envlock.doctor.fixlist.describe``), exit 1 when its status is FAILED."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from envlock.doctor.advice import DoctorReport
from envlock.doctor.runner import DoctorRequest

__all__ = ["Diagnosed", "DoctorRequest", "describe", "run_doctor"]


@dataclass(frozen=True)
class Diagnosed:
    report: DoctorReport
    verbose: bool = False

    @property
    def exit_code(self) -> int:
        return 1 if self.report["status"] == "FAILED" else 0

    def to_dict(self) -> DoctorReport:
        return self.report

    def text(self) -> str:
        return describe(self.report, verbose=self.verbose)


def _progress(line: str) -> None:
    sys.stderr.write(f"envlock doctor: {line}\n")


def run_doctor(req: DoctorRequest, *, verbose: bool = False) -> Diagnosed:
    if req.freeze is not None or req.python is not None:  # a package list, no venv
        from envlock.doctor.platform import diagnose_freeze

        return Diagnosed(diagnose_freeze(req), verbose)
    from envlock.doctor.runner import diagnose

    return Diagnosed(diagnose(req, _progress), verbose)


def describe(doc: DoctorReport, *, verbose: bool = False) -> str:
    """The report as text fitting the output's width (``envlock.doctor.fixlist``)."""
    from envlock.doctor.fixlist import NO_WIDTH
    from envlock.doctor.fixlist import describe as text
    from envlock.output import HtmlWriter, width

    return text(doc, NO_WIDTH if isinstance(sys.stdout, HtmlWriter) else width(), verbose=verbose)
