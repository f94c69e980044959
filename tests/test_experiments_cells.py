"""`experiment status` names the cells whose data xsyn cannot download, and how to provide it."""

from xsyn.data.cards import load_card
from xsyn.experiments.cells import missing_data


def test_tasks_without_a_hub_copy_say_where_their_data_goes(tmp_path, monkeypatch):
    monkeypatch.setenv("XSYN_DATA_DIR", str(tmp_path / "nowhere"))
    mtop = missing_data(load_card("mtop"), None)
    assert mtop.startswith("MTOP data, which is not on the hub (https://dl.fbaipublicfiles.com/mtop/mtop.zip")
    assert f"put it in {tmp_path / 'nowhere' / 'mtop'} or pass --data-dir DIR with DIR/mtop" in mtop
    assert "MultiATIS++ data, which is not on the hub" in missing_data(load_card("matis"), str(tmp_path / "matis"))
    (tmp_path / "matis").mkdir()
    assert missing_data(load_card("matis"), str(tmp_path / "matis")) == ""  # provided
    assert missing_data(load_card("synth"), None) == ""  # generated
    assert missing_data(load_card("pawsx"), None) == ""  # the hub has it


def test_a_runs_folder_moved_whole_keeps_its_cells_and_a_changed_setting_is_still_refused(tmp_path):
    """Paths inside the runs folder (the synth vocabulary, a pre-trained GAT) are compared by their place
    in it: a moved or copied folder's cells are its own, not 'a run with other settings'."""
    import json

    import pytest

    from xsyn.experiments.cells import check_same_run
    from xsyn.experiments.experiment_file import ExperimentError

    old, new = tmp_path / "old" / "runs", tmp_path / "elsewhere" / "runs"
    saved = {"output_dir": str(old / "synth" / "gat-seed1"), "tokenizer": str(old / "synth-vocab.txt"),
             "gat_init": str(old / "pretrain" / "tiny"), "learning_rate": 0.0003, "task": "synth"}
    cell = new / "synth" / "gat-seed1"
    (cell / "state").mkdir(parents=True)
    (cell / "config.json").write_text(json.dumps(saved))
    now = {**saved, "output_dir": str(cell), "tokenizer": str(new / "synth-vocab.txt"),
           "pretrained_syntax": str(new / "pretrain" / "tiny")}  # the run saved it under its former name
    del now["gat_init"]
    check_same_run(cell, now)  # the same run, moved
    # the cause may be an option (`experiment status --set ...`), not an edit of the file: both are named
    with pytest.raises(ExperimentError, match=r"learning_rate: 0.0003 there, 0.5 now\): the experiment file or the "
                                              r"options given \(--set, --model, --data-dir\) changed since it ran"):
        check_same_run(cell, {**now, "learning_rate": 0.5})
    outside = tmp_path / "my-vocab.txt"  # a setting outside the runs folder is compared as written
    with pytest.raises(ExperimentError, match=r"tokenizer: .*synth-vocab.txt' there"):
        check_same_run(cell, {**now, "tokenizer": str(outside)})


def test_a_cell_whose_run_recorded_what_auto_became_on_its_device_is_the_same_run(tmp_path):
    """A run records the AdamW kernel and length budget `auto` resolved to (fused, 1, none on the CPU); the cell's
    settings say `auto`: the same run, not 'a run with other settings'. A value given otherwise still differs."""
    import json

    import pytest

    from xsyn.experiments.cells import check_same_run
    from xsyn.experiments.experiment_file import ExperimentError

    cell = tmp_path / "runs" / "synth" / "none-seed1"
    (cell / "state").mkdir(parents=True)
    saved = {"output_dir": str(cell), "task": "synth", "adamw_kernel": "fused", "pad_to_multiple_of": 1,
             "max_batch_lengths": None, "micro_batch_split": "by-length", "mixed_precision": "no"}
    (cell / "config.json").write_text(json.dumps(saved))
    auto = {**saved, "adamw_kernel": "auto", "pad_to_multiple_of": "auto", "max_batch_lengths": "auto",
            "micro_batch_split": "auto", "mixed_precision": "auto"}
    check_same_run(cell, auto)
    with pytest.raises(ExperimentError, match=r"pad_to_multiple_of: 1 there, 16 now"):
        check_same_run(cell, {**auto, "pad_to_multiple_of": 16})
