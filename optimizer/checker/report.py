"""What the checker hands back: a `CheckReport` of `Violation`s."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Violation:
    """One broken rule. `family` is the checker's label of the rule (its check_* method's name, or a part
    of one: "power", "clock", "manifest"), which str() shows; `registry_families` the constraint families
    of the registry (optimizer/model/families.py, docs/formulation.md) the plan breaks: one as a rule, two
    where the plan folder cannot tell them apart (a lost site's load that no re-routing serves breaks
    failover_reserve and failover_capacity together), none where the rule checks no registered family (a
    reported figure, the folder, an index set's pruning). Written as text: the checker imports nothing of
    dcplace, and tests/test_checker_families.py holds the names to the registry's."""

    family: str
    message: str
    registry_families: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"[{self.family}] {self.message}"

@dataclass
class CheckReport:
    """What the independent checker found in a plan folder: `ok`, the families `checked`, every
    `violations` entry (family, message and the registry families broken), and the cost it recomputed from the plan's inputs."""

    folder: str
    checked: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    recomputed_cost_usd_per_year: float = 0.0
    status: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, family: str, message: str, breaks: str | tuple[str, ...] = ()) -> None:
        """One more violation of the rule `family`; `breaks`: the registered constraint family (or families) it breaks."""
        self.violations.append(Violation(family, message, (breaks,) if isinstance(breaks, str) else tuple(breaks)))

    def families_violated(self) -> set[str]:
        return {v.family for v in self.violations}

    def registry_families_violated(self) -> set[str]:
        """The registry's constraint families the violations break (docs/formulation.md)."""
        return {name for v in self.violations for name in v.registry_families}
