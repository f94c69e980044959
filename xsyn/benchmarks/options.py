"""The options of `xsyn bench model` checked before anything is built or timed, the same on every path (timing,
`--count-ops`, `--encoders`): a value no model can take, or an option the chosen path would not use, is an
`OptionError` naming the option and the fix, never a traceback from deep inside a model or a figure that quietly
ignores what was asked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from huggingface_hub.errors import StrictDataclassError

from xsyn.models.families import family_of
from xsyn.utils.errors import OptionError
from xsyn.utils.schema import SchemaError

DEFAULT_SHAPE = {"layers": 12, "hidden": 768, "heads": 12, "vocab_size": 2000}  # bert-base, a small vocabulary
FIRST_WORD_ID = 5  # the synthetic batch draws its word-piece ids from 5 up (below: the special tokens)
_FLAGS = {"layers": "--layers", "hidden": "--hidden", "heads": "--heads", "vocab_size": "--vocab-size"}


def at_least(least: int, **values: int | None) -> None:
    """Each given value (keyword: the option's name with `_` for `-`) is an integer of at least `least`."""
    for name, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise OptionError(f"--{name.replace('_', '-')} {value}: give an integer of at least {least}")


def model_shape(layers: int | None, hidden: int | None, heads: int | None, vocab_size: int | None,
                encoders: Sequence[str] | None) -> dict[str, int] | None:
    """The random model's shape from the options (the defaults where not given), checked; None with `encoders`,
    whose published shapes replace these options (given along with them, they are refused)."""
    options = {"layers": layers, "hidden": hidden, "heads": heads, "vocab_size": vocab_size}
    given = {name: value for name, value in options.items() if value is not None}
    if encoders is not None:
        if given:
            raise OptionError(f"--encoders measures each published shape as it is; {_FLAGS[next(iter(given))]} would "
                              "not be used: drop it, or drop --encoders to time a shape of your own")
        return None
    shape = {**DEFAULT_SHAPE, **given}
    at_least(1, layers=shape["layers"], hidden=shape["hidden"], heads=shape["heads"])
    at_least(FIRST_WORD_ID + 1, vocab_size=shape["vocab_size"])
    if shape["hidden"] % shape["heads"]:
        raise OptionError(f"--hidden {shape['hidden']} is not a multiple of --heads {shape['heads']}: each head takes "
                          "an equal share of the hidden size; choose a head count that divides it")
    return shape


def check_path(ops_only: bool, *, repeats: int | None, peak: float | None, compile_mode: str | None,
               encoders: Sequence[str] | None, plain_bert: bool) -> None:
    """`--count-ops` counts the ops of one eager step of each variant at one shape: an option only the timed
    path uses is refused with it, rather than ignored."""
    if not ops_only:
        return
    unused = [option for option, given in (("--repeats", repeats is not None), ("--peak-tflops", peak is not None),
                                           ("--compile", compile_mode is not None),
                                           ("--encoders", encoders is not None),
                                           ("--skip-plain-bert", not plain_bert)) if given]
    if unused:
        raise OptionError(f"--count-ops counts the ops of one eager step of each variant (no timing rounds, no "
                          f"compiling, no plain row, one shape); {', '.join(unused)} would not be used: drop "
                          f"{'it' if len(unused) == 1 else 'them'}, or drop --count-ops to time the step")


def check_variant_shapes(variants: Sequence[str], shapes: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Every variant's model at every shape (family, config fields) is one its config accepts (the variants' own
    rules: a syntax head count within the heads, ...), found before any model is built."""
    from xsyn.models.encoders import family_classes

    for family, shape in shapes:
        config_class = family_classes(family_of(family)).config
        for variant in variants:
            try:
                config_class(variant=variant, num_labels=2, **shape)
            except (SchemaError, StrictDataclassError, ValueError) as err:
                cause = err.__cause__ if isinstance(err, StrictDataclassError) and err.__cause__ else err
                raise OptionError(f"variant {variant} cannot be built at this shape ({_shown(shape)}): {cause}; "
                                  "choose another shape or leave the variant out (--variants)") from None


def _shown(shape: dict[str, Any]) -> str:
    names = {"num_hidden_layers": "--layers", "hidden_size": "--hidden", "num_attention_heads": "--heads",
             "vocab_size": "--vocab-size"}
    return ", ".join(f"{flag} {shape[key]}" for key, flag in names.items() if key in shape)
