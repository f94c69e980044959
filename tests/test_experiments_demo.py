"""The demo continues an interrupted demo of the same options, refuses one of other options, and replaces
an earlier demo when told to, saying which saved training that deletes."""

import json
import logging

import pytest

from xsyn.experiments.demo import DEMO_OUTPUTS, PLAN_FILE, DemoOutputExistsError, claim_demo_folder, run_demo

PLAN = {"seed": 1, "max_steps": None, "settings": {}}


def saved_state(run, step: int) -> None:
    (run / "state").mkdir(parents=True)
    (run / "state" / "trainer_state.json").write_text(json.dumps({"step": step}))


def test_a_folder_with_an_earlier_demo_of_other_options_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "runs" / "none-seed1").mkdir(parents=True)
    (tmp_path / "runs" / "none-seed1" / "old.json").write_text("{}")
    with pytest.raises(DemoOutputExistsError, match="already holds a demo of other options .*--overwrite-output-dir"):
        run_demo(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no vocab, cache or report written
    assert (tmp_path / "runs" / "none-seed1" / "old.json").exists()


def test_the_same_options_continue_and_say_where_the_runs_stand(tmp_path, caplog):
    (tmp_path / PLAN_FILE).write_text(json.dumps(PLAN))
    (tmp_path / "runs" / "none-seed1").mkdir(parents=True)
    (tmp_path / "runs" / "none-seed1" / "train_results.json").write_text("{}")
    saved_state(tmp_path / "runs" / "gat-seed1", 300)
    with caplog.at_level(logging.WARNING, logger="xsyn"):
        claim_demo_folder(tmp_path, PLAN, overwrite=False)
    assert f"continuing the demo in {tmp_path} (none trained, gat saved at step 300)" in caplog.text
    assert (tmp_path / "runs" / "gat-seed1" / "state").is_dir()
    with pytest.raises(DemoOutputExistsError, match="other options"):
        claim_demo_folder(tmp_path, {**PLAN, "max_steps": 30}, overwrite=False)


def test_overwrite_removes_only_the_earlier_demos_files_and_says_what_saved_training_it_deletes(tmp_path, caplog):
    for name in DEMO_OUTPUTS:
        (tmp_path / name).mkdir() if name not in ("vocab.txt", PLAN_FILE) else (tmp_path / name).write_text("x")
    saved_state(tmp_path / "runs" / "gat-seed1", 700)
    (tmp_path / "notes.txt").write_text("mine")
    with caplog.at_level(logging.WARNING, logger="xsyn"):
        claim_demo_folder(tmp_path, PLAN, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert (f"--overwrite-output-dir: deleting the earlier demo in {tmp_path} (gat saved at step 700), which a "
            "rerun without it would have continued") in caplog.text
    caplog.clear()
    claim_demo_folder(tmp_path, PLAN, overwrite=False)  # an emptied (or fresh) folder is accepted, silently
    assert caplog.text == ""
