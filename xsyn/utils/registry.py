"""One registry class for every extensible name in xsyn: syntax variants, parsers, model heads, task kinds,
metrics, data readers and encoder families.

    REGISTRY = Registry("variant", group="xsyn.variants", of=SyntaxVariant, name_of=lambda v: v.name)
    REGISTRY.add("gat", "xsyn.models.variants.gat:VARIANT")   # a "module:attribute" target, imported when read
    REGISTRY["gat"]                                          # the object
    REGISTRY["gta"]  # UnknownName: unknown variant 'gta'; choose one of none, gat, ...; did you mean 'gat'?
    "gat" in REGISTRY, list(REGISTRY), REGISTRY.names()      # names only: nothing is imported

A registry is a read-only `Mapping` from names to objects. Its targets are objects or "module:attribute"
strings, imported on first lookup (so listing a registry, as the command line does, loads nothing). Another
package adds to a registry through an entry point in the registry's group, in its pyproject.toml:

    [project.entry-points."xsyn.variants"]
    mine = "my_package.variant:VARIANT"

Entry points are listed when the registry is first read (names only), after its own entries, and loaded like
any lazy target, then checked: an entry point that cannot be imported (whatever its import raises), that gives
something else than the registry holds, whose object calls itself by another name or breaks the registry's
`check` is broken. Asked for by name (`VARIANTS["mine"]`, `--variant mine`) it is a `PluginError` naming the
entry point and its package (a message, not a traceback, on the command line); anything that reads every entry
(`values()`, `items()`: the settings table, the help texts) leaves it out with one warning naming the same, so
one broken package never stops a command that does not use it. An entry point that takes a name already
registered (a built-in's, or another package's) is refused the same way, with a warning, and the first holder
of the name keeps it. `add` registers at run time (a test, a notebook); what is added is seen by every later
lookup, whenever the modules that read the registry were imported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from importlib import import_module, metadata
from typing import Any, Generic, TypeVar

from xsyn.utils.errors import XsynError
from xsyn.utils.schema import did_you_mean

T = TypeVar("T")
log = logging.getLogger(__name__)

__all__ = ["PluginError", "Registry", "UnknownName"]


class UnknownName(XsynError, ValueError):
    """A name no registry entry has: the message lists the registered ones and the closest."""


class PluginError(XsynError, RuntimeError):
    """An installed package's entry point that does not give a usable registry entry."""


class Registry(Mapping[str, T], Generic[T]):
    """Names to objects of one kind (see the module docstring).

    - `what`: what an entry is, for messages ("variant", "task kind");
    - `group`: the entry-point group other packages register in (None: closed to them);
    - `of`: the type every entry is an instance of (a subclass of, with `classes=True`), checked on load, or
      "module:attribute" of it (imported at the first check); `expected` names it (default: module and name);
    - `name_of`: the name an entry gives itself, which must be the name it is registered under;
    - `check`: any further rule an entry must meet: the problem, in words, or None;
    - `error`: the exception an unknown name raises (a subclass of `UnknownName` or any one-argument error);
    - `plugin_error`: the exception a broken entry point raises.
    """

    def __init__(self, what: str, entries: Mapping[str, T | str] | None = None, *, group: str | None = None,
                 of: type | str | None = None, classes: bool = False, expected: str | None = None,
                 name_of: Callable[[T], str] | None = None, check: Callable[[T], str | None] | None = None,
                 error: Callable[[str], Exception] = UnknownName,
                 plugin_error: type[Exception] = PluginError):
        self.what, self.group, self.of, self.classes = what, group, of, classes
        self.expected = expected or (of.replace(":", ".") if isinstance(of, str)
                                     else f"{of.__module__}.{of.__qualname__}" if of is not None else "an entry")
        self.name_of, self.rule, self.error, self.plugin_error = name_of, check, error, plugin_error
        self._targets: dict[str, Any] = dict(entries or {})
        self._loaded: dict[str, T] = {}
        self._plugins: dict[str, metadata.EntryPoint] = {}
        self._broken: dict[str, str] = {}  # a plugin's name -> why it cannot be used
        self._warned: set[str] = set()  # each warning once per process, across `refresh`
        self._scanned = group is None

    # -- registering ---------------------------------------------------------------------------------

    def add(self, name: str, target: T | str) -> None:
        """Register `target` (an object, or "module:attribute" of one) as `name`; a name is registered once."""
        self._scan()
        known = self._targets.get(name, self._plugins.get(name))
        if known is not None and known != target:
            raise ValueError(f"{self.what} {name!r} is already registered as {_shown(known)}")
        self._targets[name] = target

    def remove(self, name: str) -> None:
        """Forget `name` (added with `add`): for tests that register an entry of their own."""
        self._targets.pop(name, None)
        self._plugins.pop(name, None)
        self._loaded.pop(name, None)
        self._broken.pop(name, None)

    def refresh(self) -> None:
        """Read the entry points again (a package installed since the registry was first read)."""
        for name in self._plugins:
            self._loaded.pop(name, None)
        self._plugins, self._broken = {}, {}
        self._scanned = self.group is None

    # -- reading -------------------------------------------------------------------------------------

    def names(self) -> tuple[str, ...]:
        """Every registered name: the registry's own in order, then the entry points' (nothing is imported)."""
        self._scan()
        return (*self._targets, *self._plugins)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def __getitem__(self, name: str) -> T:
        if name in self._loaded:
            return self._loaded[name]
        if name not in self:
            raise self.unknown(name)
        if name in self._broken:
            raise self.plugin_error(self._broken[name])
        if name in self._targets:
            target = self._targets[name]
            entry = _import(target) if isinstance(target, str) else target
            self._check(name, entry, f"{self.what} {name!r} ({_shown(target)})", ValueError)
        else:
            entry = self._load_plugin(self._plugins[name])
        self._loaded[name] = entry
        return entry

    def get(self, name: str, default: Any = None) -> T | Any:
        return self[name] if name in self else default

    def items(self) -> list[tuple[str, T]]:  # type: ignore[override]
        """Every usable entry, in order: a broken plugin is left out, with one warning naming it."""
        found = []
        for name in self.names():
            try:
                found.append((name, self[name]))
            except self.plugin_error as err:
                self._warn(f"{err}; until then xsyn goes on without it")
        return found

    def values(self) -> list[T]:  # type: ignore[override]
        return [entry for _, entry in self.items()]

    def origin(self, name: str) -> str | None:
        """The entry point and package a plugin's name comes from (for its errors); None for the registry's own."""
        self._scan()
        return _where(self._plugins[name]) if name in self._plugins else None

    def unknown(self, name: Any) -> Exception:
        """The error for a name that is not registered: the choices, and the closest one."""
        names = self.names()
        return self.error(f"unknown {self.what} {name!r}; choose one of {', '.join(names)}"
                          + did_you_mean(name, names))

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self.names())})"

    __eq__ = object.__eq__  # a registry is one place, not its current contents
    __hash__ = object.__hash__

    # -- entry points --------------------------------------------------------------------------------

    def _scan(self) -> None:
        if self._scanned:
            return
        self._scanned = True
        for point in metadata.entry_points(group=self.group):
            if point.name in self._targets:
                self._warn(f"{_where(point)} takes the name {point.name!r} of xsyn's own {self.what}: it is refused "
                           f"and {point.name!r} stays xsyn's; rename the entry point")
            elif point.name in self._plugins:
                self._warn(f"{_where(point)} takes the name {point.name!r}, which "
                           f"{_where(self._plugins[point.name])} registers first: it is refused; rename one of them")
            else:
                self._plugins[point.name] = point

    def _load_plugin(self, point: metadata.EntryPoint) -> T:
        try:
            entry = point.load()
        except Exception as err:  # a broken plugin names itself, whatever it raised on import
            self._broken[point.name] = (f"{_where(point)} cannot be loaded ({type(err).__name__}: {err}); fix or "
                                        "uninstall that package")
            raise self.plugin_error(self._broken[point.name]) from None
        try:
            self._check(point.name, entry, _where(point), self.plugin_error)
        except self.plugin_error as err:
            self._broken[point.name] = str(err)
            raise
        return entry

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning(message)

    def _check(self, name: str, entry: Any, where: str, error: Callable[[str], Exception]) -> None:
        of = _import(self.of) if isinstance(self.of, str) else self.of
        fits = of is None or (isinstance(entry, type) and issubclass(entry, of) if self.classes
                              else isinstance(entry, of))
        if not fits or (self.name_of is not None and self.name_of(entry) != name):
            whose = f" whose name is {name!r}" if self.name_of is not None else ""
            raise error(f"{where} must name a {self.expected}{whose}, got {entry!r}")
        problem = self.rule(entry) if self.rule is not None else None
        if problem:
            raise error(f"{where} {problem}")


def _import(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(import_module(module), attribute)


def _where(point: metadata.EntryPoint) -> str:
    where = f"entry point {point.name} = {point.value} (group {point.group}"
    return where + (f", package {point.dist.name})" if point.dist is not None else ")")


def _shown(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "value", repr(target))
