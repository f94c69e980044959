"""`xsyn report --analysis family,typology,parser`: where syntax helps, by family, syntactic distance and LAS.

Expected values are worked out here independently of xsyn: distances from lang2vec's URIEL archive with
scipy's cosine distance, rho and its exact p from scipy's spearmanr and permutation_test."""

import json
import math
import os
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from scipy.spatial.distance import cosine
from test_report import png_size, write_run

from xsyn.cli import main
from xsyn.metrics.correlation import Correlation
from xsyn.report import ReportError, build_report
from xsyn.report.findings import AnalysisSettings, analyse, read_parser_scores, trend_finding

LANGS = ["en", "de", "nl", "es", "fr", "zh", "ja"]
GAT = {1: [90.0, 80.0, 79.0, 78.0, 77.5, 70.0, 66.0], 2: [91.0, 81.0, 80.0, 80.0, 78.5, 72.0, 69.0]}
NONE = {1: [90.5, 79.0, 78.5, 76.0, 76.0, 66.0, 61.0], 2: [90.5, 79.5, 78.5, 77.0, 76.5, 67.0, 62.0]}


def uriel_distance(one, other):
    """Cosine distance of the two ISO 639-3 languages' syntax_knn vectors, read straight from lang2vec."""
    with np.load(files("lang2vec") / "data" / "feature_predictions.npz") as archive:
        langs = list(archive["langs"])
        columns = [k for k, name in enumerate(archive["feats"]) if name.startswith("S_")]
        vector = {code: archive["data"][langs.index(code), columns, 0].astype(float) for code in (one, other)}
    return cosine(vector[one], vector[other])


ISO3 = {"en": "eng", "de": "deu", "nl": "nld", "es": "spa", "fr": "fra", "zh": "zho", "ja": "jpn"}


def make_report(tmp_path, gat=GAT, none=NONE, langs=LANGS, pairs=False):
    def runs(variant, scores):
        return [write_run(tmp_path, f"{variant}{seed}", variant=variant, seed=seed,
                          per_language=dict(zip(langs, values, strict=True)),
                          pairs={row: {col: values[i] + j for j, col in enumerate(langs[:3])}
                                 for i, row in enumerate(langs[:3])} if pairs else None)
                for seed, values in scores.items()]

    return build_report(runs("gat", gat), runs("none", none))


def gains(gat=GAT, none=NONE):
    return [np.mean([gat[s][k] for s in gat]) - np.mean([none[s][k] for s in none]) for k in range(len(LANGS))]


def test_family_groups_follow_uriels_tree_closest_family_first(tmp_path):
    (family,) = analyse(make_report(tmp_path), AnalysisSettings(("family",)))
    # Indo-European spans two branches here (Germanic, Italic) and is split; Sino-Tibetan and Japonic are not
    by_distance = sorted([("Indo-European.Germanic", (uriel_distance("eng", "deu") + uriel_distance("eng", "nld")) / 2),
                          ("Indo-European.Italic", (uriel_distance("eng", "spa") + uriel_distance("eng", "fra")) / 2),
                          ("Sino-Tibetan", uriel_distance("eng", "zho")), ("Japonic", uriel_distance("eng", "jpn"))],
                         key=lambda item: item[1])
    assert list(family.groups) == [name for name, _ in by_distance]
    assert family.groups["Indo-European.Germanic"] == ["de", "nl"] and family.groups["Japonic"] == ["ja"]
    assert family.left_out == ["en: the source language, not a transfer target"]
    gain = dict(zip(LANGS, gains(), strict=True))
    assert f"Indo-European.Germanic {(gain['de'] + gain['nl']) / 2:+.1f} (de, nl)" in family.finding
    ja = next(point for point in family.points if point.label == "ja")
    # ja per seed: 66 - 61 = 5 and 69 - 62 = 7: gain 6, sd sqrt(2)
    assert (ja.gain, ja.group) == (6.0, "Japonic") and ja.error == pytest.approx(math.sqrt(2))


def test_typology_is_spearman_of_gain_and_uriel_distance_with_an_exact_permutation_p(tmp_path):
    (typology,) = analyse(make_report(tmp_path), AnalysisSettings(("typology",)))
    targets = LANGS[1:]
    distances = [uriel_distance("eng", ISO3[lang]) for lang in targets]
    gain = gains()[1:]
    assert [point.x for point in typology.points] == pytest.approx(distances, abs=1e-6)
    rho = stats.spearmanr(distances, gain).statistic
    exact = stats.permutation_test((gain,), lambda g: abs(stats.spearmanr(distances, g).statistic),
                                   permutation_type="pairings", alternative="greater", n_resamples=np.inf).pvalue
    assert typology.correlation.rho == pytest.approx(rho) and typology.correlation.p_value == pytest.approx(exact)
    assert typology.correlation.exact and typology.correlation.permutations == 720  # 6 languages: 6! pairings
    direction = "rises" if rho > 0 else "falls"
    assert typology.finding.startswith(f"gain {direction} with syntactic distance from en: rho = {rho:.2f}, "
                                       f"p = {exact:.2f}, 6 languages")


def test_a_language_uriel_lacks_is_named_and_left_out(tmp_path):
    langs = ["en", "de", "fr", "qqx", "ja"]
    report = make_report(tmp_path, {1: [90.0, 80.0, 78.0, 50.0, 66.0]}, {1: [90.0, 79.0, 76.0, 40.0, 61.0]}, langs)
    family, typology = analyse(report, AnalysisSettings(("family", "typology")))
    assert "qqx: URIEL has no family for it" in family.left_out
    assert "qqx: URIEL lacks it" in typology.left_out
    assert [point.label for point in typology.points] == ["de", "fr", "ja"]
    assert all(point.error is None for point in typology.points)  # one seed a side: no sd
    assert typology.finding.startswith("too few languages to test whether gain changes with syntactic distance "
                                       "from en: with 3, no ordering reaches p < 0.05 (the smallest p is 0.33)")


def test_pair_matrices_use_the_distance_between_each_pairs_languages(tmp_path):
    _, pairs = analyse(make_report(tmp_path, pairs=True), AnalysisSettings(("typology",), permutations=50))
    assert pairs.unit == "language pairs" and len(pairs.points) == 9
    de_nl = next(point for point in pairs.points if point.label == "de-nl")
    assert de_nl.x == pytest.approx(uriel_distance("deu", "nld"), abs=1e-6)
    assert next(point for point in pairs.points if point.label == "en-en").x == pytest.approx(0.0, abs=1e-9)
    assert not pairs.correlation.exact and pairs.correlation.seed == AnalysisSettings().seed  # 9! > 50: sampled


def test_parser_reads_parser_quality_output_and_names_languages_without_las(tmp_path):
    quality = tmp_path / "quality.json"
    las = {"en": 0.91, "de": 0.86, "nl": 0.84, "es": 0.88, "zh": 0.71, "ja": 0.79}
    quality.write_text(json.dumps({lang: {"treebank": "UD_x", "uas": 0.9, "las": v} for lang, v in las.items()}))
    scores = read_parser_scores(quality)
    (parser,) = analyse(make_report(tmp_path), AnalysisSettings(("parser",), scores, str(quality)))
    assert parser.left_out == [f"fr: no LAS for it in {quality}"]
    placed = [lang for lang in LANGS if lang in las]
    gain = dict(zip(LANGS, gains(), strict=True))
    assert parser.correlation.rho == pytest.approx(stats.spearmanr([las[k] for k in placed],
                                                                   [gain[k] for k in placed]).statistic)
    assert parser.points[0].label == "en"  # the source's parses feed the model too


def test_a_las_text_file_and_its_errors(tmp_path):
    listing = tmp_path / "las.tsv"
    listing.write_text("lang\tLAS\n# from the paper\nde\t86.1\nzh, 71.5\n")
    assert read_parser_scores(listing) == {"de": 86.1, "zh": 71.5}
    listing.write_text("de 86.1\nzh seventy\n")
    with pytest.raises(ReportError, match=r"las.tsv:2: LAS 'seventy' is not a number"):
        read_parser_scores(listing)
    listing.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ReportError, match=r"las.tsv: cannot be read as text"):
        read_parser_scores(listing)
    listing.write_text('{"de": 0.86}')
    assert read_parser_scores(listing) == {"de": 0.86}
    listing.write_text('[0.86]')
    with pytest.raises(ReportError, match=r"las.tsv: expected a JSON object .* found a list"):
        read_parser_scores(listing)
    listing.write_text('{"de": {"uas": 0.9}}')
    with pytest.raises(ReportError, match=r"las.tsv: de: LAS None is not a number"):
        read_parser_scores(listing)


@pytest.mark.parametrize("text, error", [
    ("en 91\nde 0.86\n", r"las.tsv:2: LAS 0.86 is a share \(0-1\), and .*las.tsv:1: LAS 91 a percentage \(0-100\): "
                        "give every LAS on one scale"),
    ('{"en": {"las": 0.91}, "de": {"las": 86}}', r"las.tsv: en: LAS 0.91 is a share \(0-1\), and .*las.tsv: de: LAS 86 "
                                                 "a percentage"),
    ("en 91\nde 186\n", r"las.tsv:2: LAS 186 is out of range; give a share from 0 to 1 .* or a percentage from 0 "
                       "to 100"),
    ('{"de": -0.2}', r"las.tsv: de: LAS -0.2 is out of range"),
    ("", r"las.tsv: no LAS in it; give one line `lang LAS` per language"),
    ("lang LAS\n# none yet\n", r"las.tsv: no LAS in it"),
    ("{}", r"las.tsv: no LAS in it"),
    ("en 91\nde 86\nde 60\n", r"las.tsv:3: a second LAS for de \(the first: .*las.tsv:2\); give each language once"),
    ('{"de": 0.8, "de": 0.7}', r"las.tsv: de: a second LAS for de \(the first: .*las.tsv: de\)"),
])
def test_las_values_are_on_one_scale_in_range_once_each_and_there_are_some(tmp_path, text, error):
    listing = tmp_path / "las.tsv"
    listing.write_text(text)
    with pytest.raises(ReportError, match=error):
        read_parser_scores(listing)


def test_a_las_language_no_run_has_is_named_with_a_did_you_mean(tmp_path, caplog):
    report = make_report(tmp_path)
    listing = tmp_path / "las.tsv"
    listing.write_text("en 91\ndeu 86\nnl 84\nes 88\nzh 71\n")
    with caplog.at_level("WARNING", logger="xsyn"):
        (parser,) = analyse(report, AnalysisSettings(("parser",), read_parser_scores(listing), str(listing)))
    assert caplog.messages == [f"{listing}:2: LAS for deu, a language no run has (left out); did you mean 'de'?"]
    assert [point.label for point in parser.points] == ["en", "nl", "es", "zh"]
    listing.write_text("eng 91\ndeu 86\n")
    result = subprocess.run([shutil.which("xsyn", path=str(Path(sys.executable).parent)), "report",
                             *[str(tmp_path / f"gat{seed}") for seed in GAT], *[f"--baseline={tmp_path / f'none{seed}'}"
                                                                                 for seed in NONE],
                             "--analysis", "parser", "--parser-quality", str(listing), "--output-dir",
                             str(tmp_path / "out")], capture_output=True, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (f"Error: {listing}: none of its languages (eng, deu) is one a run has (de, en, es, fr, ja, nl, zh): give "
            "the LAS of the runs' languages, by the codes their results use; did you mean 'en'?") in result.stderr


def test_welch_gains_combine_both_sides_sd(tmp_path):
    none = {3: NONE[1], 4: NONE[2]}  # other seeds: no pairing
    (typology,) = analyse(make_report(tmp_path, none=none), AnalysisSettings(("typology",)))
    ja = next(point for point in typology.points if point.label == "ja")
    # sd of gat's ja (66, 69) is 3/sqrt2, of none's (61, 62) 1/sqrt2: sqrt(4.5 + 0.5)
    assert ja.error == pytest.approx(math.sqrt(5.0))


def test_command_line_writes_the_analysis_section_and_explains_bad_requests(tmp_path):
    make_report(tmp_path)  # writes the run directories
    runs = [str(tmp_path / f"gat{seed}") for seed in (1, 2)]
    baselines = [f"--baseline={tmp_path / f'none{seed}'}" for seed in (1, 2)]
    out = tmp_path / "out"
    common = ["report", *runs, *baselines, "--output-dir", str(out), "--resamples", "10"]
    result = CliRunner().invoke(main, [*common, "--analysis", "family,typology"])
    assert result.exit_code == 0, result.output
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "## Where syntax helps" in markdown and "**gain " in markdown
    assert "Spearman's rho over 6 languages; p from all 720 pairings (exact)." in markdown
    saved = json.loads((out / "report.json").read_text())["analyses"]
    assert [a["name"] for a in saved] == ["family", "typology"] and saved[1]["correlation"]["n"] == 6
    assert png_size(out / "analysis" / "typology-pawsx-test-gat-languages.png")[0] > 400
    assert png_size(out / "analysis" / "family-pawsx-test-gat-languages.png")[0] > 400
    failed = CliRunner().invoke(main, [*common, "--analysis", "parser"])
    assert failed.exit_code == 1 and "--analysis parser needs the parser's LAS per language" in failed.output
    alone = CliRunner().invoke(main, ["report", *runs, "--output-dir", str(out), "--analysis", "family"])
    assert alone.exit_code == 1 and "no run has one: give the baseline's runs with --baseline" in alone.output
    failed = CliRunner().invoke(main, [*common, "--analysis", "genus"])
    assert failed.exit_code == 1 and "--analysis genus: unknown analysis; choose from family, typology, parser" \
        in failed.output


def test_a_task_of_artificial_languages_gets_no_uriel_analysis(tmp_path):
    """synth's `sov` is also the ISO code of Sonsorol (Austronesian): its card says its languages are made up."""
    def run(variant, seed, score):
        return write_run(tmp_path, f"{variant}{seed}", variant=variant, seed=seed, task="synth",
                         per_language={"svo": 99.0, "sov": score, "vso": 60.0}, config={"train_lang": "svo"})

    report = build_report([run("gat", 1, 70.0)], [run("none", 1, 65.0)])
    family, typology = analyse(report, AnalysisSettings(("family", "typology")))
    assert family.points == [] and typology.points == []
    assert family.finding == ("no family analysis: synth's languages are artificial (svo, sov, vso), and URIEL "
                              "has none of them")
    assert "sov: an artificial language" in typology.left_out


@pytest.mark.parametrize("correlation, finding", [
    (Correlation(14, -0.61, 0.021, 10000, False, 7), "gain falls with distance: rho = -0.61, p = 0.02, 14 languages"),
    (Correlation(14, 0.2, 0.48, 10000, False, 7),  # a rho with no evidence behind it claims no direction
     "no evidence that gain changes with distance (p >= 0.05): rho = 0.20, p = 0.48, 14 languages"),
    (Correlation(3, 0.5, 1.0, 6, True),  # the "gain rises ...: rho = 0.50, p = 1.00, 3 languages"
     "too few languages to test whether gain changes with distance: with 3, no ordering reaches p < 0.05 "
     "(the smallest p is 0.33); rho = 0.50, p = 1.00, 3 languages"),
    (Correlation(4, 1.0, 2 / 24, 24, True),  # 4! = 24 pairings: at best 2 / 24 = 0.083, the perfect order's
     "too few languages to test whether gain changes with distance: with 4, no ordering reaches p < 0.05 "
     "(the smallest p is 0.083); rho = 1.00, p = 0.08, 4 languages"),
    (Correlation(5, 1.0, 2 / 120, 120, True), "gain rises with distance: rho = 1.00, p = 0.02, 5 languages"),
])
def test_a_findings_wording_claims_a_direction_only_where_its_test_supports_one(correlation, finding):
    assert trend_finding(correlation, "distance", "languages", 0.05) == finding
