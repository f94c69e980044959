"""Whether the Hugging Face hub can be reached, decided once per process by one quick connection.

Without the network, a model, tokenizer or data set that the local cache lacks costs minutes of the hub
libraries' retries (2m20s measured) before their error. `offline_unless_reachable` tries one connection to
the hub (3 s at most); when it fails, it switches the hub libraries to offline mode, as `HF_HUB_OFFLINE=1`
would (for the processes this one starts too), says so once, and a missing file then fails at once with
xsyn's message. A setting the user made (`HF_HUB_OFFLINE`, `HF_DATASETS_OFFLINE`) is left as it is.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from urllib.parse import urlparse

from xsyn.utils.progress import NOTE

PROBE_SECONDS = 3.0
OFFLINE_SWITCHES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
TRUE = ("1", "ON", "YES", "TRUE")

log = logging.getLogger(__name__)
_decided: bool | None = None  # offline, once decided in this process


def offline_unless_reachable(timeout: float = PROBE_SECONDS) -> bool:
    """Whether this process works offline: as the user set it, else as one connection to the hub found."""
    global _decided
    if any(os.environ.get(name) is not None for name in OFFLINE_SWITCHES):
        return any(os.environ.get(name, "").upper() in TRUE for name in OFFLINE_SWITCHES)
    if _decided is None:
        _decided = not _reachable(hub_address(), timeout)
        if _decided:
            _go_offline()
    return _decided


def hub_address() -> tuple[str, int]:
    """The hub's host and port (`HF_ENDPOINT` where set, as the hub libraries read it)."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    return endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)


def _reachable(address: tuple[str, int], timeout: float) -> bool:
    try:
        with socket.create_connection(address, timeout=timeout):
            return True
    except OSError:  # no route, no DNS, refused, timed out
        return False


def _go_offline() -> None:
    host, port = hub_address()
    log.log(NOTE, f"no network: {host}:{port} cannot be reached, so xsyn works offline (as HF_HUB_OFFLINE=1): "
                "models, tokenizers and data sets come from local folders and the hub cache, and one that is not "
                "there fails at once instead of after minutes of retries")
    for name in OFFLINE_SWITCHES:
        os.environ[name] = "1"
    # the libraries read their switch when imported: those imported already are switched here
    if "huggingface_hub.constants" in sys.modules:
        sys.modules["huggingface_hub.constants"].HF_HUB_OFFLINE = True
    if "datasets.config" in sys.modules:
        config = sys.modules["datasets.config"]
        config.HF_HUB_OFFLINE = config.HF_DATASETS_OFFLINE = True
