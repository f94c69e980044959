"""`xsyn experiment status` answers at once: resolving and checking the cells' settings loads no model library."""

from test_cli_settings import heavy_modules_after


def test_experiment_status_imports_no_model_library(tmp_path):
    heavy, output = heavy_modules_after(["experiment", "status", "synth", "--output-dir", str(tmp_path)])
    assert heavy == []
    assert "12 cells in" in output and "to do" in output
