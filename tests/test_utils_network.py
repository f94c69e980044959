"""Without the network a missing hub file cost minutes of retries: one quick connection decides, once, and
the run works offline, failing at once on what the cache lacks, and saying so."""

from __future__ import annotations

import os
import socket
import time

import huggingface_hub.constants
import pytest

from xsyn.utils import network
from xsyn.utils.progress import NOTE


@pytest.fixture
def undecided(monkeypatch):
    """A process that has not decided yet, with no offline setting of the user's."""
    for name in network.OFFLINE_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(network, "_decided", None)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    probes = []

    def unreachable(address, timeout):
        probes.append((address, timeout))
        raise OSError("Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    yield probes
    for name in network.OFFLINE_SWITCHES:  # (monkeypatch restores the environment it was told about)
        monkeypatch.delenv(name, raising=False)


def test_no_network_is_found_once_and_switches_the_hub_libraries_offline(undecided, caplog):
    with caplog.at_level(NOTE, logger="xsyn"):  # a note: shown by default, hidden by a command's --quiet
        assert network.offline_unless_reachable() and network.offline_unless_reachable()
    assert undecided == [(("huggingface.co", 443), network.PROBE_SECONDS)]  # one probe per process
    assert caplog.text.count("no network: huggingface.co:443 cannot be reached") == 1
    assert huggingface_hub.constants.HF_HUB_OFFLINE
    assert all(os.environ[name] == "1" for name in network.OFFLINE_SWITCHES)  # for its children


def test_offline_a_model_the_cache_lacks_fails_at_once_with_xsyns_message(undecided, monkeypatch):
    from xsyn.models.factory import checkpoint_config
    from xsyn.utils.errors import XsynError

    network.offline_unless_reachable()
    attempts, waits = [], []  # "at once": no connection tried and no retry's wait (2m20s of them before)
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: attempts.append(address))
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: attempts.append(args) or [])
    monkeypatch.setattr(time, "sleep", waits.append)
    with pytest.raises(XsynError, match="nosuch-org/nosuch-model"):
        checkpoint_config("nosuch-org/nosuch-model")
    assert attempts == [] and waits == [] and undecided == [(("huggingface.co", 443), network.PROBE_SECONDS)]


def test_the_users_setting_wins_and_nothing_is_probed(undecided, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert not network.offline_unless_reachable() and undecided == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert network.offline_unless_reachable() and undecided == []


def test_the_endpoint_the_hub_libraries_use_is_the_one_probed(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example:8080")
    assert network.hub_address() == ("mirror.example", 8080)
    monkeypatch.delenv("HF_ENDPOINT")
    assert network.hub_address() == ("huggingface.co", 443)


def test_a_run_on_a_hub_model_decides_before_its_first_hub_request(undecided):
    """The settings' check of a hub model's config was the first request, and it retried before the probe."""
    from xsyn.data.cards import load_card
    from xsyn.run.settings import resolve

    resolve("synth", "none", load_card("synth"), {}, {"model": "nosuch-org/nosuch-model", "parser": "chain"})
    assert len(undecided) == 1 and huggingface_hub.constants.HF_HUB_OFFLINE
