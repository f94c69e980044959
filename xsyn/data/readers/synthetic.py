"""`synth`: no files, xsyn's synthetic typology benchmark (`xsyn.data.synth`)."""

from __future__ import annotations

from collections.abc import Iterator

from xsyn.data.example import Example
from xsyn.data.readers.base import DataFormatError, Reader, ReadRequest
from xsyn.data.synth import generate_split

# -- synthetic ------------------------------------------------------------------------------------


class SynthReader(Reader):
    """xsyn's synthetic typology benchmark: examples (with gold trees) made by `xsyn.data.synth`."""

    OPTIONS = {"sizes": (dict, {}), "seed": (int, 0)}
    needs_files = False

    def read(self, request: ReadRequest) -> Iterator[Example]:
        sizes = self.option(request, "sizes")
        if request.split not in sizes:
            raise DataFormatError(f"the synth layout states no size for split {request.split!r}; "
                                  f"add it to options.sizes")
        yield from generate_split(request.lang, request.split, int(sizes[request.split]),
                                  self.option(request, "seed"))
