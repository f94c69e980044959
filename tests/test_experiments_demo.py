"""The demo refuses to train over an earlier demo, unless told to replace it."""

import pytest

from xsyn.experiments.demo import DEMO_OUTPUTS, DemoOutputExistsError, run_demo


def test_a_folder_with_an_earlier_demo_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "runs" / "none-seed1").mkdir(parents=True)
    (tmp_path / "runs" / "none-seed1" / "old.json").write_text("{}")
    with pytest.raises(DemoOutputExistsError, match="already holds a demo .*--overwrite-output-dir"):
        run_demo(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no vocab, cache or report written
    assert (tmp_path / "runs" / "none-seed1" / "old.json").exists()


def test_overwrite_removes_only_the_earlier_demos_files(tmp_path):
    from xsyn.experiments.demo import _claim

    for name in DEMO_OUTPUTS:
        (tmp_path / name).mkdir() if name != "vocab.txt" else (tmp_path / name).write_text("x")
    (tmp_path / "notes.txt").write_text("mine")
    _claim(tmp_path, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    _claim(tmp_path, overwrite=False)  # an emptied (or fresh) folder is accepted
