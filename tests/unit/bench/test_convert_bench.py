"""`kraft-bench convert` runs both directions and reports what it converted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kraft.bench import main


@pytest.mark.parametrize("direction", ["to-kraft", "from-kraft"])
def test_convert_reports_records_per_second(direction: str, tmp_path: Path) -> None:
    out = tmp_path / "convert.json"
    result = CliRunner().invoke(main, ["convert", "--direction", direction, "--compression", "zstd",
                                       "--num-records", "40", "--batch-records", "20", "--json", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    assert (summary["records"], summary["direction"], summary["compression"]) == (40, direction, "zstd")
    assert summary["records_per_sec"] > 0 and summary["batch_bytes"] > 0
