"""The documentation's pictures: an HTML report in headless Chromium, and the heatmaps and charts it holds.

    python scripts/docs_screenshots.py            # writes docs/images/*.png

The report is of two made-up systems (gat against a none baseline, two seeds each, four languages and a
language-pair matrix; the same runs as the tests of `xsyn report --html`), written by the installed `xsyn`,
with the analyses of where syntax helps. Needs Chromium (`apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default=str(REPO / "docs" / "images"))
    args = parser.parse_args()
    browser = next(filter(None, map(shutil.which, BROWSERS)), None)
    if browser is None:
        sys.exit("no Chromium found: apt-get install chromium")
    sys.path.insert(0, str(REPO / "tests"))
    from test_report_html import example_runs

    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        runs, baselines = example_runs(root / "runs")
        (root / "las.txt").write_text("en 0.90\nde 0.85\nfr 0.83\nja 0.70\n", encoding="utf-8")
        report = root / "report"
        subprocess.run(["xsyn", "report", *map(str, runs), *[a for b in baselines for a in ("--baseline", str(b))],
                        "--analysis", "family,typology,parser", "--parser-quality", str(root / "las.txt"),
                        "--permutations", "100", "--resamples", "200", "--html", "--output-dir", str(report)],
                       check=True, capture_output=True)
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--hide-scrollbars", f"--user-data-dir={root / 'profile'}", "--window-size=1200,1400",
                        f"--screenshot={out / 'report.png'}", (report / "report.html").as_uri()],
                       check=True, capture_output=True, timeout=120)
        task = report / "pawsx-test-accuracy"
        for picture, name in ((task / "pairs-delta-gat.png", "heatmap-deltas.png"),
                              (task / "pairs-gat.png", "heatmap-scores.png"),
                              (task / "per_language.png", "per-language.png"),
                              (report / "analysis" / "family-pawsx-test-gat-languages.png", "family.png"),
                              (report / "analysis" / "typology-pawsx-test-gat-languages.png", "typology.png")):
            if not picture.is_file():
                sys.exit(f"the report did not write the picture for {name}: {sorted(report.rglob('*.png'))}")
            shutil.copyfile(picture, out / name)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
