"""The lab's servers get ports that nothing can take between the choice and the server's bind.

A CI run failed because SearXNG, started on a port the kernel had picked (bind to port 0), found it taken
seconds later ('Address already in use'): such a port lies in the range outgoing connections draw from.
"""

from __future__ import annotations

import socket

import pytest

from lab import servers
from lab.servers import LAB_PORTS_LOWEST, ephemeral_ports, free_port


def test_a_lab_port_lies_outside_the_range_outgoing_connections_take_their_ports_from() -> None:
    ephemeral = ephemeral_ports()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        clients = [socket.create_connection(listener.getsockname(), timeout=5) for _ in range(20)]
        try:
            assert all(client.getsockname()[1] in ephemeral for client in clients)  # the premise, on this host
        finally:
            for client in clients:
                client.close()
    ports = [free_port() for _ in range(50)]
    assert not [port for port in ports if port in ephemeral]
    assert min(ports) >= LAB_PORTS_LOWEST


def test_a_lab_port_is_free_when_given_and_never_given_twice() -> None:
    ports = [free_port() for _ in range(200)]  # none bound yet, as when a lab starts its servers one by one
    assert len(set(ports)) == len(ports)
    for port in ports[:20]:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))  # what the server will do: it must not fail


def test_a_port_a_server_holds_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", free_port()))
    held.listen()
    taken = held.getsockname()[1]
    servers._handed_out.discard(taken)  # as if another program, not this lab, held it

    def taken_first(pool: list[int], count: int) -> list[int]:
        return [taken, *[port for port in pool[:count] if port != taken]]

    monkeypatch.setattr(servers._DRAWS, "sample", taken_first)
    try:
        port = free_port()
    finally:
        held.close()
    assert port != taken
