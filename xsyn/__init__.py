"""xsyn: syntax in cross-lingual transfer.

`import xsyn` makes saved xsyn models loadable with transformers' Auto classes
(`AutoModelForSequenceClassification.from_pretrained(run / "best")`) without importing torch or
transformers itself, so the commands that need no model start fast. The registration
(`xsyn.models.auto`) runs as soon as transformers' Auto module has been imported and no import of
transformers or xsyn is half done (it imports both); at once if that is already so.

Why an import hook and not a `register` call here: transformers' registries take classes only
(`AutoConfig.register(type, ConfigClass)`, `AutoModel.register(ConfigClass, ModelClass)`; the lazy
tables resolve names inside `transformers.models` alone, and there is no entry point for other
packages), and xsyn's classes subclass transformers' and torch's, so a call at `import xsyn` would load
torch and transformers into every command (6.5 s on the 2-core test machine, against 2-8 ms for
`import xsyn`). `xsyn.models.register_auto_classes()` is the explicit call; importing `xsyn.models`'
model modules makes it (`factory.py`); this hook makes it for code that imports only `xsyn` and then
transformers, as docs/finetune.md shows.
"""

from __future__ import annotations

import platform
import sys

__version__ = "0.1.0"

_AUTO_MODULE = "transformers.models.auto.configuration_auto"
_WATCHED = ("transformers", "xsyn")  # packages whose imports the registration must not interrupt


def versions() -> dict[str, str]:
    """The versions a result depends on, saved with every run's results."""
    import accelerate
    import torch
    import transformers

    return {"xsyn": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "accelerate": accelerate.__version__, "python": platform.python_version()}


def provenance() -> dict:
    """What every run's results record beside them: `versions()`, and `platform`, what the float kernels
    chose by (`xsyn.utils.machine`: CPU model and flags, MKL/oneDNN, threads, GPUs)."""
    from xsyn.utils.machine import machine

    return {"versions": versions(), "platform": machine()}


class _AutoRegistrationHook:  # a meta path finder (importlib.abc costs ~25 ms to import)
    """Watches the imports of transformers and xsyn; registers once the Auto module is in and the
    last of those imports in progress has finished (so nothing half-initialised gets imported)."""

    def __init__(self) -> None:
        self.in_progress: set[str] = set()

    def find_spec(self, fullname, path, target=None):
        if fullname.partition(".")[0] not in _WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _WatchedLoader(spec.loader, self)
        return spec

    def loaded(self) -> None:
        if self.in_progress or _AUTO_MODULE not in sys.modules or self not in sys.meta_path:
            return
        sys.meta_path.remove(self)
        try:
            from xsyn.models.auto import register_auto_classes

            register_auto_classes()
        except BaseException:
            sys.meta_path.insert(0, self)
            raise


class _WatchedLoader:  # an importlib loader
    def __init__(self, loader, hook: _AutoRegistrationHook):
        self.loader, self.hook = loader, hook

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.hook.in_progress.add(module.__name__)
        try:
            self.loader.exec_module(module)
        finally:
            self.hook.in_progress.discard(module.__name__)
        self.hook.loaded()

    def __getattr__(self, name: str):
        return getattr(self.loader, name)


if _AUTO_MODULE in sys.modules:
    from xsyn.models.auto import register_auto_classes

    register_auto_classes()
else:
    sys.meta_path.insert(0, _AutoRegistrationHook())
