"""The parse cache's benchmark measures the cache it says it does: every entry written, found and read back."""

from __future__ import annotations

import json
import zlib

from xsyn.benchmarks.parse import cache_rates
from xsyn.syntax.cache import cache_key
from xsyn.syntax.parsing.chain import ChainParser


def test_cache_rates_write_index_and_read_every_entry_of_the_size_asked_for(tmp_path):
    records = ChainParser().parse_texts(["a dog barks .", "the cat , asleep , purrs"], "en")
    result = cache_rates(records, 300, 120, chunk=64, folder=tmp_path)
    expected = 0
    for i in range(300):  # a line: key, tab, crc32 as 8 hex digits, tab, the record's JSON, newline
        payload = json.dumps(records[i % 2].to_dict(), ensure_ascii=False, separators=(",", ":")).encode()
        line = b"%s\t%08x\t%s\n" % (cache_key(f"sentence {i}", "en", "bench", "1", {}).encode(),
                                     zlib.crc32(payload), payload)
        expected += len(line)
    assert (result["entries"], result["lookups"], result["bytes"]) == (300, 120, expected)
    assert result["writes_per_s"] > 0 and result["lookups_per_s"] > 0 and result["open_seconds"] > 0
    assert list(tmp_path.iterdir()) == []  # the temporary cache is gone
