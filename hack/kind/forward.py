"""Forward a loopback port of this machine to a loopback port inside a network namespace.

``python3 hack/kind/forward.py NETNS_PATH LOCAL_PORT TARGET_PORT`` listens on
127.0.0.1:LOCAL_PORT here, then moves itself into the network namespace at NETNS_PATH
(``setns(2)``; the listening socket stays where it was made) and connects each accepted
connection to 127.0.0.1:TARGET_PORT there: how kubectl and the tests reach the API server of
the kind cluster that hack/kind/engine.sh runs inside its namespace. Runs until killed (the
engine's ``down`` stops it by PID).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000


def pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes from ``source`` to ``sink`` until ``source`` closes, then close ``sink``'s
    sending side."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def serve(client: socket.socket, port: int) -> None:
    """Connect ``client`` to 127.0.0.1:``port`` (in the namespace) both ways."""
    with client, socket.create_connection(("127.0.0.1", port)) as upstream:
        back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
        back.start()
        pipe(client, upstream)
        back.join()


def main(netns: str, local_port: int, target_port: int) -> None:
    """Listen here, enter ``netns``, forward every connection (see the module docstring).

    Raises:
        OSError: the port is taken, or setns failed (not root, no such namespace).
    """
    listener = socket.create_server(("127.0.0.1", local_port))
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(netns, os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns({netns})")
    os.close(fd)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, target_port), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
