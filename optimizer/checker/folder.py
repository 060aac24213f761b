"""The folder itself: its integrity (manifest.json: every file's SHA-256, nothing added or missing,
one scenario hash), its provenance, and the solve record (status against gap and bound)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from dcplace.optimizer.checker.common import ABS_TOL, GAP_TOL, REL_TOL, is_number, sha256_file

MANIFEST = "manifest.json"
MARKER = ".dcplace-folder.json"  # written by dcplace at the move into place (models/outputs.py)
LATER_KINDS = ("report", "export", "compare", "pareto")  # outputs other commands may write into a plan folder later
WHY_FOLDER = "why"  # ... and the analyses of `dcplace why`, in batch-kind folders under PLAN/why/
REQUIRED_FILES = (
    "plan.json", "sites.csv", "assignments.csv", "jobs.csv", "inputs/scenario.yaml", "inputs/provenance.json",
    "inputs/sites.csv", "inputs/regions.csv", "inputs/jobs.csv",
    *(f"inputs/catalog/{t}.csv" for t in ("chips", "rack_configs", "cooling", "fabrics", "workloads", "throughput")),
)
OPTIONAL_FILES = ("inputs/pair_costs.csv", "inputs/footprint.csv", "inputs/backbone.csv", "inputs/profiles.csv", "inputs/cloud_regions.csv",
                  "hourly.csv", "dispatch.csv", "backfill.csv", "rentals.csv", "rent_assignments.csv", "routing.csv")
PLAN_STATUSES = ("optimal", "feasible")  # solve.status with a plan (docs/plan-format.md)
NO_PLAN_STATUSES = ("infeasible", "unbounded", "no_solution", "error")  # ... and without one: the folder records why
DECISION_KEYS = ("sites", "assignments", "jobs", "hourly", "dispatch", "backfill", "rentals", "rent_assignments", "routing")
# The fields of plan.json's records (docs/plan-format.md): "required" and "optional" (the second may be absent).


def inputs_digest(folder: str | Path) -> str:
    """SHA-256 of the sorted lines "<path relative to inputs/> <sha256 of the file>\\n" over
    every file under `folder`/inputs (the manifest's `inputs_sha256`; docs/plan-format.md)."""
    inputs = Path(folder) / "inputs"
    rows = sorted((p.relative_to(inputs).as_posix(), sha256_file(p)[0]) for p in inputs.rglob("*") if p.is_file())
    return hashlib.sha256("".join(f"{rel} {digest}\n" for rel, digest in rows).encode("utf-8")).hexdigest()



class FolderChecks:
    """check_manifest, check_provenance, check_status."""

    def check_manifest(self) -> None:
        """manifest.json lists every file with its SHA-256 and size; nothing missing, changed or added."""
        if not (self.folder / MANIFEST).is_file():
            self.fail("manifest", f"{self.folder} has no {MANIFEST}: it was written before plan folders carried a manifest "
                      "(or the manifest was removed), so its files cannot be verified. Re-run `dcplace solve` "
                      "(the command is in inputs/provenance.json, `rerun`) to write a checked folder.")
            return
        doc = self.manifest
        if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
            self.fail("manifest", f"{MANIFEST} is not a manifest (a JSON object with a 'files' mapping).")
            return
        if doc.get("format_version") != 1 or doc.get("algorithm", "sha256") != "sha256":
            self.fail("manifest", f"{MANIFEST}: format_version {doc.get('format_version')!r} / algorithm "
                      f"{doc.get('algorithm')!r} is not the documented 1 / sha256.")
        listed = doc["files"]
        root = self.folder.resolve()
        for rel, entry in sorted(listed.items()):
            path = (self.folder / rel).resolve()
            if rel in (MANIFEST, MARKER) or root not in path.parents:
                self.fail("manifest", f"{MANIFEST} lists '{rel}', which cannot be a file of the plan.")
                continue
            if not path.is_file():
                self.fail("manifest", f"{rel} is listed in {MANIFEST} but missing from the folder.")
                continue
            digest, size = sha256_file(path)
            if not isinstance(entry, dict) or entry.get("sha256") != digest or entry.get("bytes") != size:
                self.fail("manifest", f"{rel} was changed after the plan was written: its SHA-256 {digest[:12]}… "
                          f"({size} bytes) differs from the manifest's.")
        for path in sorted(self.folder.rglob("*")):
            rel = path.relative_to(self.folder).as_posix()
            if not path.is_file() or rel in (MANIFEST, MARKER) or self._later_output(rel):
                continue
            if rel not in listed:
                self.fail("manifest", f"{rel} is in the folder but not in {MANIFEST}: it was added after the plan was written.")
            elif rel not in REQUIRED_FILES and rel not in OPTIONAL_FILES:
                self.fail("manifest", f"{rel} is not a file of a plan folder (docs/plan-format.md lists them).")
        for rel in REQUIRED_FILES:
            if rel not in listed and not (self.folder / rel).is_file():
                self.fail("manifest", f"{rel}, which every plan folder holds, is missing and unlisted.")
        if (self.folder / "inputs").is_dir():
            digest = inputs_digest(self.folder)
            if doc.get("inputs_sha256") != digest:
                self.fail("manifest", f"inputs_sha256 in {MANIFEST} is {str(doc.get('inputs_sha256'))[:12]}…, "
                          f"the files in inputs/ give {digest[:12]}…: the inputs are not the ones the plan was solved on.")

    def _later_output(self, rel: str) -> bool:
        """Whether `rel` lies in a subfolder that another dcplace command wrote into the plan
        folder later (it carries the marker of a report, export, ... folder): not plan data."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            try:
                doc = json.loads((self.folder.joinpath(*parts[:i]) / MARKER).read_text())
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict) and (doc.get("kind") in LATER_KINDS or (i == 1 and parts[0] == WHY_FOLDER and doc.get("kind") == "batch")):
                return True
        return False

    def check_provenance(self) -> None:
        """One scenario: plan.json, its provenance, inputs/provenance.json and the manifest agree."""
        plan = self.plan
        if plan.get("format_version") != 1:
            self.fail("provenance", f"plan.json format_version is {plan.get('format_version')!r}; this checker reads 1.")
        hashes = {"plan.json scenario_hash": plan.get("scenario_hash"),
                  "plan.json provenance.scenario_hash": (plan.get("provenance") or {}).get("scenario_hash")}
        try:
            stored = json.loads((self.folder / "inputs" / "provenance.json").read_text())
        except (OSError, ValueError) as exc:
            self.fail("provenance", f"inputs/provenance.json cannot be read ({type(exc).__name__}).")
            stored = None
        if isinstance(stored, dict):
            hashes["inputs/provenance.json scenario_hash"] = stored.get("scenario_hash")
            if stored != plan.get("provenance"):
                differ = sorted(k for k in set(stored) | set(plan.get("provenance") or {})
                                if stored.get(k) != (plan.get("provenance") or {}).get(k))
                self.fail("provenance", f"plan.json provenance differs from inputs/provenance.json in: {', '.join(differ)}.")
        if isinstance(self.manifest, dict):
            hashes[f"{MANIFEST} scenario_hash"] = self.manifest.get("scenario_hash")
        if len(set(hashes.values())) != 1:
            shown = "; ".join(f"{k} {str(v)[:12]}…" for k, v in hashes.items())
            self.fail("provenance", f"the scenario hashes disagree ({shown}): plan.json was not solved on these inputs.")
        names = {"plan.json scenario": plan.get("scenario"), "inputs/scenario.yaml name": self.inp.name}
        if isinstance(stored, dict):
            names["inputs/provenance.json scenario_name"] = stored.get("scenario_name")
        if len({str(v) for v in names.values()}) != 1:
            self.fail("provenance", "the scenario names disagree: " + "; ".join(f"{k} {v!r}" for k, v in names.items()) + ".")
    def check_status(self) -> None:
        """A status of the documented set; `optimal` or `feasible` exactly when plan.json carries a plan (a folder
        that claims no plan but holds decisions is checked as any plan, and named here); `optimal` only within
        options.mip_gap; gap = (objective - bound) / |objective|; bound <= objective."""
        solve = self.plan["solve"]
        status, gap = solve["status"], solve.get("gap")
        carried = self._carried()
        if status not in PLAN_STATUSES + NO_PLAN_STATUSES:
            self.fail("status", f"solve.status is {status!r}, not one of {', '.join(PLAN_STATUSES + NO_PLAN_STATUSES)}; "
                      "the plan it carries was checked as any plan.")
        elif status in NO_PLAN_STATUSES and carried:
            self.fail("status", f"solve.status is {status!r} (no plan), but plan.json carries {', '.join(carried)}: "
                      "a plan that claims there is none; it was checked as any plan.")
        elif status in PLAN_STATUSES and not self.plan.get("sites"):
            self.fail("status", f"solve.status is {status!r}, but plan.json lists no sites: there is no plan.")
        if status in PLAN_STATUSES and self.plan.get("diagnosis"):
            self.fail("status", f"solve.status is {status!r}, but plan.json carries a diagnosis of infeasibility.")
        provenance = self.plan.get("provenance") or {}
        solver = provenance.get("solver") if isinstance(provenance.get("solver"), dict) else {}
        if (solve.get("solver"), solve.get("solver_version")) != (solver.get("name"), solver.get("version")):
            self.fail("status", f"solve names solver {solve.get('solver')!r} {solve.get('solver_version')!r}; its provenance "
                      f"{solver.get('name')!r} {solver.get('version')!r}.")
        if solve.get("options") != provenance.get("options"):
            self.fail("status", "solve.options differ from the options of plan.json's provenance.")
        race = solve.get("race") if isinstance(solve.get("race"), dict) else {}
        if race.get("winner") is not None and status in PLAN_STATUSES:
            # the race's record must name the engine whose plan is here (its objectives are the engines' own
            # words, in the model's terms: with the clock the plan's cost is re-stated by dispatch, so not compared)
            if solve.get("solver") != race["winner"]:
                self.fail("status", f"solve.race names {race['winner']!r} the winner, but solve.solver is {solve.get('solver')!r}.")
        for key in ("build_time_s", "solve_time_s", "extract_time_s"):
            if key in solve and (not is_number(solve[key]) or solve[key] < 0):
                self.fail("status", f"solve.{key} is {solve[key]!r}, not a time in seconds.")
        for key, value in (solve.get("model") or {}).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                self.fail("status", f"solve.model.{key} is {value!r}, not a count.")
        objective, bound = solve.get("objective_usd_per_year"), solve.get("best_bound_usd_per_year")
        mip_gap = (solve.get("options") or {}).get("mip_gap")
        if not is_number(mip_gap):
            self.fail("status", f"solve.options.mip_gap is {mip_gap!r}, not a number.")
            mip_gap = 0.0
        if objective is not None and bound is not None:
            if bound > objective + max(ABS_TOL, REL_TOL * abs(objective)):
                self.fail("status", f"best bound ${bound:,.2f} exceeds the objective ${objective:,.2f}: impossible when minimizing.")
            expected = abs(objective - bound) / max(abs(objective), 1e-9)
            if gap is None or not is_number(gap) or abs(gap - expected) > GAP_TOL + REL_TOL * expected:
                self.fail("status", f"gap is {gap!r}; (objective - bound) / |objective| = {expected:.6g}.")
        elif gap is not None:
            self.fail("status", f"gap {gap!r} is given without both an objective and a bound.")
        if status == "optimal":
            absolute = abs(objective - bound) if objective is not None and bound is not None else math.inf
            if gap is None or not is_number(gap):
                self.fail("status", "status is 'optimal' without a gap: nothing proves it.")
            elif gap > mip_gap + GAP_TOL and absolute > ABS_TOL:
                self.fail("status", f"status is 'optimal' with gap {gap:.6g} above options.mip_gap {mip_gap:g}; it is 'feasible'.")
