"""xsyn: syntax in cross-lingual transfer."""

__version__ = "0.1.0"


def versions() -> dict[str, str]:
    """The versions a result depends on, saved with every run's results."""
    import platform

    import accelerate
    import torch
    import transformers

    return {"xsyn": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "accelerate": accelerate.__version__, "python": platform.python_version()}
