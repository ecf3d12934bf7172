"""The one lifecycle both serving-stack plugins share (``corun.vllm_plugin``,
``corun.sglang_plugin``): the features an environment variable names, the version gate,
the record of what was patched, the counters and the line that says the plugin is on.

One vocabulary for both: ``enable(features=None)`` (``None``: the environment's
variable) / ``disable()``, ``enabled()``, ``counters()`` / ``reset_counters()``,
``FEATURES``, ``TESTED``, ``place_times()`` and placement's budget per call
(``<ENV>_BUDGET_US``, ``corun._budget``). One behaviour for a setting that says two things or names no
feature (``off,place``, a typo): a ``ValueError`` naming the variable, its value and the
known names, raised by ``enable()`` (so at the stack's plugin loading, before it serves):
a deployment that asked for something else must not run as if it had asked for nothing,
nor for more than it named. A tested release with a local build suffix (vLLM's
``0.33.0+cu128``) is that release.

A feature asked for that cannot act here (a module it needs does not import, a
budget of 0, an allocator it does not know) is said in a WARNING line of its own,
``corun: <stack> plugin <feature>: off (<reason>)``, and is never among those on.

The "on" line is a WARNING on the ``corun`` logger: ``vllm serve`` configures only the
``vllm`` logger (``vllm/logger.py``), so another logger's records reach Python's
last-resort handler, which prints WARNING and above and nothing below; SGLang's
``configure_logger`` sets up the root logger at INFO. At WARNING the line is seen under
both, once per process that enables a feature (each stack loads plugins in every process
it starts).
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import threading
import types
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Tuple, Union

from ._budget import Budget
from ._guard import Counters

__all__ = ["Hooked", "Lifecycle"]

log = logging.getLogger("corun")

# Words that turn every feature on, or none.
_ALL = frozenset({"all", "1", "on"})
_NONE = frozenset({"0", "off", "none"})


class Hooked(Exception):
    """A function corun's feature would stand in for is another plugin's hook already
    (:meth:`Lifecycle.replace`): the feature stays off, and the message says why."""


class Lifecycle:
    """One plugin's state: its features, the versions it was tested with, what it
    patched (owner, attribute, original) and its counters.

    ``counters`` start with every documented key at 0 (``errors`` and, per hook,
    ``<hook>_errors`` included), so that a reader never meets a ``KeyError``."""

    def __init__(
        self,
        stack: str,
        env: str,
        features: Tuple[str, ...],
        tested: Tuple[str, ...],
        version: Callable[[], Optional[str]],
        counters: Iterable[str],
        hooks: Iterable[str],
    ) -> None:
        self.stack = stack
        self.env = env
        self.features = features
        self.tested = tested
        self._version = version
        names = [*counters, "unsupported_version", *(f"{h}_errors" for h in hooks)]
        self.counters = Counters(*names)
        self.lock = threading.RLock()
        self.on: set[str] = set()
        # Features asked for that cannot act here, and why (:meth:`turned_off`).
        self.off: Dict[str, str] = {}
        # (owner, name, original, what corun set or None, its switch or None): see patch.
        self._patches: List[Tuple[Any, str, Any, Any, Optional[List[bool]]]] = []
        # Switches turned off beneath another plugin's hook: (owner, name, the switch,
        # what it wrapped), put back out once that plugin unhooks (:meth:`_sweep`).
        self._dead: List[Tuple[Any, str, Any, Any]] = []
        # Placement's CPU budget per call, set by ``<env>_BUDGET_US`` (``_budget.py``).
        self.budget = Budget(f"{env}_BUDGET_US")

    # -- which features ---------------------------------------------------------------

    def parse(self, value: Union[None, str, Iterable[str]], environ: Optional[Dict[str, str]] = None) -> FrozenSet[str]:
        """The features ``value`` names: a comma-separated string or a list of names,
        ``all`` (or ``1``, ``on``) for every one; ``None``: the environment's variable;
        unset, empty, ``0``, ``off``, ``none``: no feature. A name that is no feature, or
        ``off`` (``0``, ``none``) beside any other name, is a ``ValueError`` naming the
        variable and the value."""
        if value is None:
            import os

            value = (os.environ if environ is None else environ).get(self.env, "")
        given = value if isinstance(value, str) else ",".join(str(v) for v in value)
        names = {v.strip().lower() for v in given.split(",") if v.strip()}
        unknown = names - set(self.features) - _ALL - _NONE
        if unknown:
            raise ValueError(
                f"corun: {self.env}={given!r} names unknown features {', '.join(sorted(unknown))} "
                f"(known: {', '.join(self.features)}, or all; off for none)"
            )
        if names & _NONE and names - _NONE:
            raise ValueError(
                f"corun: {self.env}={given!r} turns features off and on at once: "
                f"{', '.join(sorted(names & _NONE))} means no feature, so it stands alone"
            )
        if names & _ALL:
            return frozenset(self.features)
        return frozenset(names & set(self.features))

    # -- which version ----------------------------------------------------------------

    def version_ok(self) -> bool:
        """Whether the installed stack is a version in ``tested``, a local build of one
        included (``0.33.0+cu128``: PEP 440's local label after ``+``, the same release);
        if not, that is logged once naming the version found and those tested, counted
        (``unsupported_version`` is 1), and nothing is patched."""
        version = self._version()
        if version is not None and version.split("+", 1)[0] in self.tested:
            return True
        self.counters.add("unsupported_version", 1 - self.counters.get("unsupported_version"))
        if self.counters.first_time("version"):
            log.warning(
                "corun: %s %s is not a version the %s plugin was tested with (%s): nothing patched",
                self.stack,
                version or "(not installed)",
                self.stack,
                ", ".join(self.tested),
            )
        return False

    # -- what was patched -------------------------------------------------------------

    def patch(self, owner: Any, name: str, new: Any) -> None:
        """Sets ``owner.name`` to ``new``, recording the attribute as stored (a class's
        plain function, a module's global) for :meth:`restore`.

        What is set is ``new`` behind a switch: while corun is on it calls ``new``; once
        :meth:`restore` has found another plugin's hook over it (that plugin hooked the
        same function after corun, so its hook calls corun's), the switch passes every
        call to what corun wrapped. That hook then stays, and runs once per call over
        the stack's own function, with nothing of corun between."""
        self._sweep()
        original = vars(owner)[name]
        if not isinstance(original, types.FunctionType):
            # A descriptor of another kind (a staticmethod, say) is not called as
            # stored: ``new`` goes in as it is, and restore puts the original back.
            self._patches.append((owner, name, original, new, None))
            setattr(owner, name, new)
            return
        live = [True]

        @functools.wraps(new)
        def switched(*args: Any, **kwargs: Any) -> Any:
            return (new if live[0] else original)(*args, **kwargs)

        self._patches.append((owner, name, original, switched, live))
        setattr(owner, name, switched)

    def replace(self, owner: Any, name: str, new: Any) -> None:
        """:meth:`patch` for a function corun stands in for (it never calls what was
        there): only over the stack's own function (its module and name are the owner's,
        and it wraps nothing). Over another plugin's hook it raises :class:`Hooked`
        naming the function and the hook found there: corun's would be on while that
        hook never ran again, or the other way round."""
        self._sweep()
        found = vars(owner)[name]
        if isinstance(owner, types.ModuleType):
            where, qualname = owner.__name__, name
        else:
            where, qualname = owner.__module__, f"{owner.__qualname__}.{name}"
        own = (getattr(found, "__module__", None), getattr(found, "__qualname__", None)) == (where, qualname)
        if not own or hasattr(found, "__wrapped__"):
            raise Hooked(
                f"{where}.{qualname} is another plugin's hook already ({found!r} found there): "
                f"corun's stands in for {self.stack}'s own function and would never run that hook"
            )
        self.patch(owner, name, new)

    def record(self, owner: Any, name: str, original: Any) -> None:
        """Records a patch made by someone else on corun's behalf (SGLang's
        ``HookRegistry``), so that :meth:`restore` puts ``original`` back."""
        self._patches.append((owner, name, original, None, None))

    def mark(self) -> int:
        """A point :meth:`restore` can go back to (a feature half installed)."""
        return len(self._patches)

    def restore(self, mark: int = 0) -> List[Tuple[Any, str, Any, Any]]:
        """Puts back every patch made since ``mark``, newest first; returns them as
        ``(owner, name, original, the value it replaced)``.

        A function hooked again after corun (another plugin's hook is there, not
        corun's) is left as it is, corun's switch beneath it off (:meth:`patch`),
        and a WARNING names the function and the hook found there: putting the
        original back would take the other plugin's hook out with corun's."""
        undone = []
        self._sweep()
        while len(self._patches) > mark:
            owner, name, original, applied, live = self._patches.pop()
            found = vars(owner).get(name)
            if live is not None and found is not applied:
                live[0] = False
                self._dead.append((owner, name, applied, original))
                log.warning(
                    "corun: %s.%s was hooked after corun (%r found there): that hook stays, "
                    "and corun's beneath it now passes every call to the %s function it wrapped",
                    getattr(owner, "__name__", owner), name, found, self.stack,
                )
                continue
            undone.append((owner, name, original, found))
            setattr(owner, name, original)
        return undone

    def _sweep(self) -> None:
        """Puts the stack's function back where a switch turned off by :meth:`restore`
        is the attribute again (the plugin that had hooked over it unhooked, restoring
        what it found: corun's switch): nothing of corun is left there."""
        keep = []
        for owner, name, switch, original in self._dead:
            if vars(owner).get(name) is switch:
                setattr(owner, name, original)
            else:  # still beneath the other plugin's hook
                keep.append((owner, name, switch, original))
        self._dead = keep

    # -- what is on -------------------------------------------------------------------

    def turned_on(self, features: Iterable[str]) -> None:
        """Notes ``features`` as on and says so in one WARNING line (when any is new)."""
        new = set(features) - self.on
        self.on |= new
        for feature in new:
            self.off.pop(feature, None)
        if new:
            log.warning(
                "corun: %s plugin on: %s (%s; counters: corun.%s_plugin.counters())",
                self.stack,
                ", ".join(f for f in self.features if f in self.on),
                self.env,
                self.stack.lower(),
            )
    def turned_off(self, feature: str, reason: str, exc_info: bool = False) -> None:
        """Notes that ``feature``, asked for, cannot act here and why, and says so in
        one WARNING line per feature and reason: ``corun: <stack> plugin <feature>: off
        (<reason>)``; the feature is not among those on. ``exc_info``: the exception
        being handled goes to the DEBUG log (a reason names it already)."""
        self.off[feature] = reason
        if self.counters.first_time(f"off {feature}: {reason}"):
            log.warning("corun: %s plugin %s: off (%s)", self.stack, feature, reason)
            if exc_info:
                log.debug("corun: why %s is off", feature, exc_info=True)


    def without_time(self, feature: str) -> bool:
        """Whether ``feature`` is placement under a budget of 0, which gives it no time:
        then said off (:meth:`turned_off`), and its hooks, which would only count
        fallbacks, stay out."""
        if feature != "place" or self.budget.us != 0:
            return False
        self.turned_off(feature, f"{self.budget.env}=0 gives placement no time")
        return True


def installed_version(dist: str) -> Optional[str]:
    """The installed distribution's version, or ``None``; read from its metadata, so
    that checking it imports nothing of the stack."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
