"""Input problems that name the file, the row and the field, and say what would fix them.

Loading collects every problem it finds before raising, so a user fixes a file in one
pass instead of one error per run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InputProblem:
    """One thing wrong with the inputs.

    `row` is the 1-based line number in a CSV file (the header is line 1, so the first
    record is row 2) or the 1-based feature number in a GeoJSON/GeoPackage layer; None
    when the problem is not tied to one row.
    """

    file: str
    row: int | None
    field: str | None
    message: str
    fix: str = ""

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f", row {self.row}"
        if self.field:
            where += f", field '{self.field}'"
        text = f"{where}: {self.message}"
        if self.fix:
            text += f" Fix: {self.fix}"
        return text


DANGLING_LINK = "is a symbolic link that leads to no file (its target is missing, or the links form a loop)."


def unreadable(path) -> tuple[str, str]:
    """(message, fix) for a file the operating system will not let dcplace read."""
    return "cannot be read: permission denied.", f"make the file readable by the user running dcplace (e.g. chmod u+r {path})."


class ScenarioError(Exception):
    """The scenario cannot be used as given; `problems` lists every reason found."""

    def __init__(self, problems: list[InputProblem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ProblemLog:
    """Collects problems while loading; `raise_if_any` ends the load if there were any."""

    def __init__(self) -> None:
        self.problems: list[InputProblem] = []
        self._origins: dict[tuple[str, int | None, str | None], str] = {}

    def add(self, file: str, row: int | None, field: str | None, message: str, fix: str = "") -> None:
        origin = self._origins.get((file, row, field))
        if origin:
            message = f"{message.rstrip('.')} ({origin})."
        self.problems.append(InputProblem(file, row, field, message, fix))

    def note_origin(self, file: str, row: int | None, field: str | None, origin: str) -> None:
        """Say where a cell's value came from (an override) in any problem later found in it."""
        self._origins[(file, row, field)] = origin

    def extend(self, problems: list[InputProblem]) -> None:
        self.problems.extend(problems)

    def __bool__(self) -> bool:
        return bool(self.problems)

    def raise_if_any(self) -> None:
        if self.problems:
            raise ScenarioError(self.problems)
