"""The one rule every hook corun puts into a serving stack follows: a hook never breaks
serving. An exception inside a corun hook is logged once (per hook), counted, and that
call goes the stack's own way.

    counters = Counters("placed", "fallback", "errors")
    safe = guarded(counters, "placement", own_way)(corun_way)
    safe(*args)   # corun_way(*args); on any exception: own_way(*args)

A hook must raise before it changes the stack's state, or undo what it changed: the
stack's own way then runs on the state it would have seen. A hook that calls the stack's
own code calls it through ``stack_way(f)``: an exception from there is the stack's, so the
guard passes it on to the caller unchanged (the same object), counts nothing and does not
run the stack's way a second time. Exceptions that mean "stop the
process" (``KeyboardInterrupt``, ``SystemExit``) are not
caught: only ``Exception`` is.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable, Dict, TypeVar

__all__ = ["Counters", "guarded", "stack_way"]

log = logging.getLogger("corun")

F = TypeVar("F", bound=Callable[..., Any])


class Counters:
    """Named integer counters a user can read (``snapshot()``), safe to bump from several
    threads. ``errors`` is always present: it counts exceptions the guards caught."""

    def __init__(self, *names: str) -> None:
        self._lock = threading.Lock()
        self._values: Dict[str, int] = {name: 0 for name in (*names, "errors")}
        self._logged: set[str] = set()

    def add(self, name: str, n: int = 1) -> None:
        """Adds ``n`` to counter ``name`` (created at 0 if new)."""
        with self._lock:
            self._values[name] = self._values.get(name, 0) + n

    def get(self, name: str) -> int:
        """The value of counter ``name`` (0 if it was never bumped)."""
        with self._lock:
            return self._values.get(name, 0)

    def snapshot(self) -> Dict[str, int]:
        """A copy of every counter."""
        with self._lock:
            return dict(self._values)

    def reset(self) -> None:
        """Sets every counter back to 0 (the once-only log messages stay logged)."""
        with self._lock:
            for name in self._values:
                self._values[name] = 0

    def first_time(self, key: str) -> bool:
        """``True`` the first time ``key`` is asked about, ``False`` after: for messages
        logged once."""
        with self._lock:
            if key in self._logged:
                return False
            self._logged.add(key)
            return True


class _StackRaised(Exception):
    """Carries an exception the stack's own code raised inside a hook (``stack_way``) out
    to the guard, which raises the original."""

    def __init__(self, original: Exception) -> None:
        super().__init__(original)
        self.original = original


def stack_way(f: F) -> F:
    """``f``, the stack's own function, as a hook calls it: an exception from it is marked
    as the stack's, so that :func:`guarded` passes it through unchanged instead of
    counting it as corun's and calling the stack's way again."""

    @functools.wraps(f)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except Exception as e:
            raise _StackRaised(e) from None

    return call  # type: ignore[return-value]


def guarded(counters: Counters, hook: str, own_way: Callable[..., Any]) -> Callable[[F], F]:
    """Wraps a corun hook: an exception from it is counted in ``counters`` (``errors``
    and ``<hook>_errors``), logged once per hook with its traceback, and the same call is
    then made the stack's own way (``own_way`` with the same arguments), whose result, or
    exception, is the caller's. An exception of the stack's own code that the hook called
    through :func:`stack_way` is the caller's as it was raised: not counted, and
    ``own_way`` is not called (the stack's function ran once)."""

    def wrap(corun_way: F) -> F:
        @functools.wraps(corun_way)
        def call(*args: Any, **kwargs: Any) -> Any:
            theirs = None
            try:
                return corun_way(*args, **kwargs)
            except _StackRaised as e:
                theirs = e.original
            except Exception:
                counters.add("errors")
                counters.add(f"{hook}_errors")
                if counters.first_time(hook):
                    log.warning(
                        "corun: the %s hook failed; this call and any later failing one "
                        "go the stack's own way (logged once, counted in errors)",
                        hook,
                        exc_info=True,
                    )
            if theirs is not None:
                # Raised outside the handler, so that the stack's exception carries no
                # context of corun's marker: the caller sees what the stack raised.
                raise theirs
            return own_way(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap
