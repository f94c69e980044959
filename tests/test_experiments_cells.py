"""`experiment status` names the cells whose data xsyn cannot download, and how to provide it."""

from xsyn.data.cards import load_card
from xsyn.experiments.cells import missing_data


def test_tasks_without_a_hub_copy_say_where_their_data_goes(tmp_path, monkeypatch):
    monkeypatch.setenv("XSYN_DATA_DIR", str(tmp_path / "nowhere"))
    mtop = missing_data(load_card("mtop"), None)
    assert mtop.startswith("needs MTOP data, which is not on the hub (https://dl.fbaipublicfiles.com/mtop/mtop.zip")
    assert f"put it in {tmp_path / 'nowhere' / 'mtop'} or pass --data-dir DIR with DIR/mtop" in mtop
    assert "needs MultiATIS++ data" in missing_data(load_card("matis"), str(tmp_path / "matis"))
    (tmp_path / "matis").mkdir()
    assert missing_data(load_card("matis"), str(tmp_path / "matis")) == ""  # provided
    assert missing_data(load_card("synth"), None) == ""  # generated
    assert missing_data(load_card("pawsx"), None) == ""  # the hub has it
