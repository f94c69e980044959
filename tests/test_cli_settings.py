"""`xsyn settings` answers at once: it reads the settings' dataclasses, never loads torch or transformers."""

import json
import os
import subprocess
import sys

HEAVY = ("torch", "transformers", "accelerate", "datasets", "matplotlib")


def heavy_modules_after(args: list[str]) -> tuple[list[str], str]:
    """Run `xsyn ARGS` in a fresh interpreter; the heavy packages it imported, and its output."""
    script = ("import json, sys\nfrom click.testing import CliRunner\nfrom xsyn.cli import main\n"
              f"result = CliRunner().invoke(main, {args!r})\n"
              "assert result.exit_code == 0, result.output\n"
              f"print(json.dumps([sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})), result.output]))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_settings_imports_no_model_library():
    heavy, output = heavy_modules_after(["settings", "--task", "pawsx", "--variant", "gat"])
    assert heavy == []
    assert "gat_delta" in output and "learning_rate" in output  # model and run settings both listed
