"""How a model input is built from its segments' parses: the conventions where the papers' text and the authors'
released code part (`docs/variants.md`, "paper, code and xsyn"). Each default is xsyn's reading of the papers; the
other value is what a released code does, which the variants' `ReleasedCode` declarations select together
(`--set reproduce=ahmad2021`). They are run settings (`RunConfig` takes each field under the same rule) because
they decide the inputs of every variant of a run, the baseline's included.

    conventions = InputConventions(sep_attachment="segment_end", tokenize_by="words")
    aligner = WordpieceAligner(tokenizer, 128, conventions)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from xsyn.utils.schema import one_of, setting, strict

SEP_ATTACHMENTS = ("cls", "segment_end")
TOKENIZATIONS = ("text", "words")
TRUNCATION_TIES = ("first", "last")
TRUNCATIONS = ("segments", "end")
PUNCTUATIONS = ("upos", "ascii")
# The string Li et al.'s `src/dataset.py: process` tests each lower-cased piece against (`piece in ...`): a piece
# that is one of these characters, or a run of them in this order, is punctuation.
ASCII_PUNCTUATION = '!"#$%&\'()*+,.-/:;<=>?@[\\]^_'


@strict
@dataclass
class InputConventions:
    """The conventions of `WordpieceAligner` and `prepare_features` (xsyn's defaults: the papers' text)."""

    sep_attachment: str = setting("cls", check=one_of(SEP_ATTACHMENTS), help="the parent of a [SEP] in an input of "
                                  "two or more segments: cls (the paper, Ahmad et al. 2.2) or segment_end (the last "
                                  "piece of the segment before it, taken before truncation, as Ahmad et al.'s "
                                  "utils_classify.py does; single segments keep [SEP] -> [CLS])")
    tokenize_by: str = setting("text", check=one_of(TOKENIZATIONS), help="text: the segment's text is cut into "
                               "pieces and aligned to the parse; words: each word of the parse is cut on its own "
                               "(French du -> the pieces of de and le), as the three released codes do")
    truncation_tie: str = setting("first", check=one_of(TRUNCATION_TIES), help="which of two equally long segments "
                                  "longest-first truncation cuts: first, or last (Ahmad et al.'s utils_classify.py)")
    truncation: str = setting("segments", check=one_of(TRUNCATIONS), help="an input over max_length that is not "
                              "windowed: segments (pieces cut longest first, special tokens kept) or end (the input "
                              "cut after max_length tokens, its final [SEP] lost, as Li et al.'s run.py does)")
    punctuation: str = setting("upos", check=one_of(PUNCTUATIONS), help="the pieces marked UPOS PUNCT: upos (those "
                               "of the parser's PUNCT words) or ascii (the pieces whose lower-cased text is in "
                               f"{ASCII_PUNCTUATION}, whatever the word, as Li et al.'s dataset.py opens them; other "
                               "pieces of PUNCT words become SYM)")
    carry_cut_dependents: bool = setting(False, help="a truncated or windowed input also carries, as a tree node "
                                         "after its pieces, one cut dependent of each kept piece whose dependents "
                                         "were all cut, so that whether a piece heads anything is known as in the "
                                         "whole input (SG-Net's run_squad2.py mask reads it before the window is "
                                         "cut)")
    qa_context_first: bool = setting(False, help="extractive QA inputs are [CLS] context [SEP] question [SEP] "
                                     "(SG-Net's run_squad2.py) instead of [CLS] question [SEP] context [SEP]")

    @classmethod
    def of(cls, settings) -> InputConventions:
        """The conventions a run's settings give (any object with these fields as attributes: a `RunConfig`)."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(cls)})

    def changed(self) -> dict[str, object]:
        """The conventions that differ from xsyn's defaults (what a cache key adds; none: the key is as before)."""
        default = type(self)()
        return {name: value for name, value in asdict(self).items() if getattr(default, name) != value}


DEFAULT_CONVENTIONS = InputConventions()
