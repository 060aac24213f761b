"""The scenario format: round trips, geodata inputs, atomic plan folders."""

from __future__ import annotations

import geopandas as gpd
import pandas as pd
import pytest
from shapely.geometry import Point

from helpers import make_scenario, region, site
from dcplace.models import load_scenario, write_scenario
from dcplace.models.plan import write_plan_folder
from dcplace.optimizer import SolveOptions, solve


def test_default_round_trips_through_write_scenario(tmp_path):
    original = load_scenario()
    again = load_scenario(write_scenario(original, tmp_path / "copy"))
    assert again.content_hash == original.content_hash
    assert again.sites == original.sites and again.regions == original.regions


@pytest.mark.parametrize("suffix,driver", [(".geojson", "GeoJSON"), (".gpkg", "GPKG")])
def test_sites_and_regions_from_geodata(tmp_path, suffix, driver):
    csv_path = make_scenario(tmp_path, [site("a", 10, 20), site("b", 11, 21)], [region("r", 10.5, 20.5)])
    for table in ("sites", "regions"):
        frame = pd.read_csv(tmp_path / f"{table}.csv", keep_default_na=False)
        geo = gpd.GeoDataFrame(frame.drop(columns=["lat", "lon"]), geometry=[Point(x, y) for x, y in zip(frame.lon, frame.lat)], crs=4326)
        geo.to_file(tmp_path / f"{table}{suffix}", driver=driver)
    yaml_text = csv_path.read_text().replace("sites.csv", f"sites{suffix}").replace("regions.csv", f"regions{suffix}")
    geo_path = tmp_path / "geo.yaml"
    geo_path.write_text(yaml_text)
    from_csv, from_geo = load_scenario(csv_path), load_scenario(geo_path)
    assert [(s.id, s.lat, s.lon) for s in from_geo.sites] == [(s.id, s.lat, s.lon) for s in from_csv.sites]
    assert from_geo.regions[0].demand_tok_s == from_csv.regions[0].demand_tok_s


def test_plan_folder_is_atomic(tmp_path):
    scenario = load_scenario(make_scenario(tmp_path / "in", [site("a", 0, 0)], [region("r", 0, 0.1)]))
    plan = solve(scenario, SolveOptions(mip_gap=0))
    out = tmp_path / "plan"
    write_plan_folder(plan, scenario, out)
    before = (out / "plan.json").read_text()

    def explode(folder):
        assert (folder / "plan.json").exists() and (folder / "inputs" / "scenario.yaml").exists()
        raise RuntimeError("verification failed")

    with pytest.raises(RuntimeError):
        write_plan_folder(plan, scenario, out, verify=explode)
    assert (out / "plan.json").read_text() == before, "the old folder survives a failed write"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "plan"], "no temporary folder is left"


def test_plan_records_how_to_reproduce_it(tmp_path):
    scenario = load_scenario(make_scenario(tmp_path / "in", [site("a", 0, 0)], [region("r", 0, 0.1)]))
    plan = solve(scenario, SolveOptions(mip_gap=0, seed=7))
    prov = plan.provenance
    assert prov["scenario_hash"] == scenario.content_hash == plan.scenario_hash
    assert prov["seed"] == 7 and prov["options"]["mip_gap"] == 0
    assert prov["solver"]["version"] == plan.solve.solver_version
    assert prov["packages"]["highspy"] != "not installed" and prov["packages"]["pyomo"] != "not installed"
    out = tmp_path / "plan"
    write_plan_folder(plan, scenario, out)
    rerun = load_scenario(out / "inputs" / "scenario.yaml")
    assert rerun.content_hash == scenario.content_hash


def test_data_export_writes_an_editable_copy(tmp_path):
    from typer.testing import CliRunner

    from dcplace.cli import app

    result = CliRunner().invoke(app, ["data", "export", str(tmp_path / "mine")])
    assert result.exit_code == 0, result.output
    exported = load_scenario(tmp_path / "mine" / "scenario.yaml")
    assert exported.content_hash == load_scenario().content_hash
    assert (tmp_path / "mine" / "catalog" / "provenance.csv").exists()
    assert (tmp_path / "mine" / "provenance.csv").exists()
    again = CliRunner().invoke(app, ["data", "export", str(tmp_path / "mine")])
    assert again.exit_code == 2 and "not empty" in again.output


def test_scenario_hash_follows_the_published_recipe():
    """docs/plan-format.md, "Scenario hash", recomputed here from its words: sorted JSON of the
    record less where the files were; with pair costs, those appended as pydantic's JSON."""
    import hashlib
    import json

    from pydantic import TypeAdapter

    from dcplace.models import scenario_from_cost_matrix
    from dcplace.models.records import PairCost

    exclude = {"source_path": True, "content_hash": True, "files": True, "latency": {"backbone"}}
    default = load_scenario()
    payload = json.dumps(default.model_dump(mode="json", exclude=exclude), sort_keys=True)
    assert default.content_hash == hashlib.sha256(payload.encode()).hexdigest()
    matrix = scenario_from_cost_matrix([1, 2], [3, 4], [[0.5, 1], [2, 0]])
    payload = json.dumps(matrix.model_dump(mode="json", exclude={**exclude, "pair_costs": True}), sort_keys=True).encode()
    pairs = TypeAdapter(tuple[PairCost, ...]).dump_json(matrix.pair_costs)
    assert pairs.startswith(b'[{"region":"c1","site":"w1","workload":"demand","usd_per_year":0.5}')
    assert matrix.content_hash == hashlib.sha256(payload + b"\npair_costs:" + pairs).hexdigest()
