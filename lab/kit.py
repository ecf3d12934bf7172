"""The stack-run kit: one way to start a side of a run in its own process and talk to it,
one free port, one NIXL descriptor count. ``lab.e2e``, ``lab.stack_vllm`` and
``lab.stack_sglang`` start their processes with :class:`Child` and nothing else.

The protocol, written once. The parent spawns (``multiprocessing``'s spawn context: a
fresh interpreter, no inherited engine state) a child that builds ``make(*args)`` and
answers ``("ok", None)`` when it is built. The parent then sends commands, tuples
``(name, *args)``; the child answers each with ``("ok", obj.name(*args))``. ``("exit",)``
calls ``obj.exit()`` when it has one, answers its result and ends the child. Any exception
in the child is answered ``("error", "<role>: <traceback>")`` and ends it; the parent
raises it as :class:`SideError`. A child that dies without an answer (a crash in native
code sends none) or says nothing for the timeout is a :class:`SideError` too, never a hang.

While no command is waiting the child calls ``obj.idle()`` every 2 ms when it has one (a
vLLM engine steps, so that its connector's notifications are served). A child whose
process made NIXL agents leaves through :func:`lab.nixl_exit.leave` (``nixl=True``).
"""

from __future__ import annotations

import multiprocessing as mp
import socket
import time
import traceback
from typing import Any, Callable, Optional

from lab import nixl_exit

#: Seconds a side may take to answer a command (start-up included) unless the call says.
TIMEOUT = 600.0


class SideError(RuntimeError):
    """A side of a run failed: its traceback, its death, or its silence."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nixl_posted(agent: Any, handle: Any) -> int:
    """The descriptors NIXL posted for ``handle`` after its own merge of neighbours
    adjacent on both sides in the same order: its telemetry's ``descCount``, read once the
    transfer is DONE (before, NIXL says NOT_POSTED). The agent needs telemetry on
    (``capture_telemetry=True`` or ``NIXL_TELEMETRY_ENABLE=y``)."""
    return int(agent.get_xfer_telemetry(handle).descCount)


def _serve(conn: Any, role: str, make: Callable[..., Any], args: tuple, nixl: bool) -> None:
    """The child's side of the protocol (see the module docs)."""
    try:
        obj = make(*args)
        conn.send(("ok", None))
        idle = getattr(obj, "idle", None)
        while True:
            if idle is not None and not conn.poll(0.002):
                idle()
                continue
            name, *cmd_args = conn.recv()
            if name == "exit":
                done = getattr(obj, "exit", None)
                conn.send(("ok", done() if done is not None else None))
                return
            conn.send(("ok", getattr(obj, name)(*cmd_args)))
    except BaseException as ex:
        conn.send(("error", f"{role}: {type(ex).__name__}: {ex}\n{traceback.format_exc()}"))
    finally:
        if nixl:
            nixl_exit.leave(0)


class Child:
    """One side of a run in a spawned process (the protocol of the module docs).
    ``Child(role, make, *args)`` starts it; :meth:`ready` waits until it is built."""

    def __init__(self, role: str, make: Callable[..., Any], *args: Any, nixl: bool = False):
        ctx = mp.get_context("spawn")
        self.role = role
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, role, make, args, nixl), daemon=True)
        self.proc.start()

    def send(self, name: str, *args: Any) -> None:
        """Sends one command; :meth:`answer` reads its answer."""
        self.conn.send((name, *args))

    def answer(self, timeout: float = TIMEOUT) -> Any:
        """The next answer's value; a :class:`SideError` when the side failed, died
        without answering, or said nothing for ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.conn.poll(min(1.0, timeout)):
            if not self.proc.is_alive():
                raise self._died()
            if time.monotonic() > deadline:
                raise SideError(f"{self.role}: no answer in {timeout:.0f} s")
        try:
            kind, value = self.conn.recv()
        except EOFError:  # its end closed: the process is ending
            self.proc.join(5)
            raise self._died() from None
        if kind == "error":
            raise SideError(value)
        return value

    def _died(self) -> SideError:
        return SideError(f"{self.role}: died (exit code {self.proc.exitcode}) without an answer")

    def ready(self, timeout: float = TIMEOUT) -> None:
        """Waits until the side is built."""
        self.answer(timeout)

    def call(self, name: str, *args: Any, timeout: float = TIMEOUT) -> Any:
        """One command and its answer."""
        self.send(name, *args)
        return self.answer(timeout)

    def close(self, timeout: Optional[float] = 30.0) -> None:
        """Waits for the process to end (after ``exit``), then kills it if it has not."""
        if self.proc.pid is None:
            return
        self.proc.join(timeout)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
