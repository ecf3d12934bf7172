"""The stack-run kit's process protocol (``lab.kit``): answers, the child's exception as an
error naming its role, a child that dies or says nothing as an error and never a hang,
the idle hook, and ``exit``'s answer."""

import os
import time

import pytest

from lab import kit


class Counter:
    """A side: counts idle calls, adds, fails, dies or sleeps on command."""

    def __init__(self, start):
        self.n, self.idles = start, 0

    def idle(self):
        self.idles += 1

    def add(self, k):
        self.n += k
        return self.n

    def idled(self):
        return self.idles > 0

    def fail(self):
        raise ValueError("no such page")

    def die(self):
        os._exit(3)

    def sleep(self):
        time.sleep(30)

    def exit(self):
        return ("bye", self.n)


class Broken:
    def __init__(self):
        raise OSError("cannot register memory")


def test_commands_answer_in_order_and_exit_answers_last():
    c = kit.Child("decode", Counter, 10)
    try:
        c.ready(60)
        assert c.call("add", 5) == 15
        c.send("add", 1)
        c.send("add", 2)
        assert (c.answer(60), c.answer(60)) == (16, 18)
        time.sleep(0.2)
        assert c.call("idled")  # stepped between commands
        assert c.call("exit") == ("bye", 18)
    finally:
        c.close()
    assert c.proc.exitcode == 0


def test_a_failing_command_is_an_error_naming_the_side():
    c = kit.Child("prefill", Counter, 0)
    try:
        c.ready(60)
        with pytest.raises(kit.SideError, match=r"prefill: ValueError: no such page"):
            c.call("fail")
    finally:
        c.close()


def test_a_side_that_cannot_be_built_says_why():
    c = kit.Child("decode", Broken)
    try:
        with pytest.raises(kit.SideError, match=r"decode: OSError: cannot register memory"):
            c.ready(60)
    finally:
        c.close()


def test_a_side_that_dies_or_says_nothing_is_an_error_not_a_hang():
    for side, call, timeout, error in [("decode", "die", 60, r"decode: died \(exit code 3\) without an answer"),
                                       ("prefill", "sleep", 2, r"prefill: no answer in 2 s")]:
        c = kit.Child(side, Counter, 0)
        try:
            c.ready(60)
            with pytest.raises(kit.SideError, match=error):
                c.call(call, timeout=timeout)
        finally:
            c.proc.kill()  # the sleeping one is still at work; the dead one: a no-op
            c.close()


def test_free_port_is_a_bindable_port():
    import socket

    port = kit.free_port()
    assert 0 < port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
