"""`synapse bench serve`: a real `synapse serve http` process on 127.0.0.1 under a small
bounded load, measured from outside; every acknowledged turn checked."""

from __future__ import annotations

import json

import pytest

from synapse_integrations.bench.serve import format_serve_table, run_load
from synapse_integrations.cli import main
from synapse_integrations.errors import InvalidInputError

pytestmark = [pytest.mark.server, pytest.mark.slow]


def test_bench_serve_measures_a_real_server_and_checks_what_it_stored(tmp_path, capsys):
    out = tmp_path / "serve.json"
    assert main(["bench", "serve", "--clients", "3", "--ops", "8", "--namespaces", "2",
                 "--write-share", "0.25", "--rounds", "2", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["settings"]["clients"] == 3 and results["settings"]["embedder"] == "hashing"
    assert len(results["rounds"]) == 2
    for run in results["rounds"]:
        assert run["ops"] == 24 and run["errors"] == 0 and run["cross_namespace"] == 0
        # a quarter of each client's 8 operations are writes, spread evenly
        assert run["write"]["n"] == 6 and run["read"]["n"] == 18 and run["acked"] == 6
        assert run["throughput_ops_s"] > 0
        assert 0 < run["read"]["p50_ms"] <= run["read"]["p95_ms"] <= run["read"]["p99_ms"]
    assert results["stored"] == {"lost": 0, "duplicated": 0, "unexpected": 0}
    printed = capsys.readouterr().out
    assert format_serve_table(results) in printed
    assert "0 lost, 0 duplicated, 0 unexpected" in printed


@pytest.mark.parametrize("kwargs", [{"write_share": 1.5}, {"clients": 0}])
def test_a_load_with_bad_settings_is_refused(kwargs):
    with pytest.raises(InvalidInputError):
        run_load("http://127.0.0.1:9", **kwargs)
