"""A small TCP proxy (threads, loopback only) that a test can cut or stall: the database "unreachable"
without touching the shared PostgreSQL server. While cut, every open connection is closed and new ones are
accepted and dropped at once, as a client sees a server that went away. While stalled, nothing is
forwarded and nothing is closed: open connections go half-open (the kernel still acknowledges every
packet, so TCP keepalives see nothing wrong) and new ones are accepted and never answered, as a client
sees a paused server or a link that silently stopped carrying traffic. Armed with `lose_next_commit_reply`,
it swallows the server's next reply that reports a commit and closes that connection: the work is done
in the database, and the client learns only that its connection died."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time

_READY_IDLE = b"Z\x00\x00\x00\x05I"  # ReadyForQuery, session idle
_ASYNC = {b"A", b"N", b"S"}  # NotificationResponse, NoticeResponse, ParameterStatus


class CuttableProxy:
    def __init__(self, target_host: str = "127.0.0.1", target_port: int = 5432) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._cut = threading.Event()
        self._stalled = threading.Event()
        self._parked: list[socket.socket] = []  # accepted while stalled, never answered
        self._closed = threading.Event()
        self.connections = 0  # accepted while up
        self.refused = 0  # accepted and dropped while cut
        self._lose_commit_reply = threading.Event()
        self.lost_replies = 0  # commit replies swallowed (their connections closed)
        self._thread = threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True)
        self._thread.start()

    def url_for(self, url: str) -> str:
        """The same database URL, routed through this proxy."""
        return url.replace(f"{self.target[0]}:{self.target[1]}", f"127.0.0.1:{self.port}", 1)

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()

    def lose_next_commit_reply(self) -> None:
        """Arm: the next reply that ends with the session idle after a completed command (PostgreSQL's
        CommandComplete then ReadyForQuery 'I': a statement on its own, or a COMMIT, has committed) is
        swallowed whole and its connection closed. Replies before it pass: a statement inside a
        transaction, a describe round trip."""
        self._lose_commit_reply.set()

    def _take_commit_reply(self) -> bool:
        """Whether this connection's committed reply is the one to swallow (one per arming, whichever
        connection's reply completes first)."""
        with self._lock:
            if not self._lose_commit_reply.is_set():
                return False
            self._lose_commit_reply.clear()
            self.lost_replies += 1
            return True

    def stall(self) -> None:
        self._stalled.set()

    def restore(self) -> None:
        self._cut.clear()
        self._stalled.clear()
        with self._lock:
            parked, self._parked = self._parked, []
        for s in parked:  # their clients gave up long ago (connect timeout)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed.set()
        self.cut()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(timeout=5)

    def _accept_loop(self) -> None:
        self._listener.settimeout(0.2)
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._cut.is_set():
                self.refused += 1
                client.close()
                continue
            if self._stalled.is_set():
                self.refused += 1
                with self._lock:
                    self._parked.append(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self.connections += 1
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        held = b""  # while armed: the server's reply so far, whole messages, not yet forwarded
        tail = b""  # the start of a server message not yet received whole
        starting = True  # until the server's first ReadyForQuery (an SSL answer is not framed)
        try:
            while not self._closed.is_set():
                if self._stalled.is_set():
                    time.sleep(0.02)
                    continue
                for key, _ in sel.select(timeout=0.1):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    if key.fileobj is b and starting:
                        starting = not data.endswith(_READY_IDLE)
                    elif key.fileobj is b:
                        # Server messages pass whole: a reply held once armed then starts at a message
                        # boundary even when the server sent it in pieces (PostgreSQL flushes every
                        # 8 kB). Held from mid-message, its framing was misread and the connection hung
                        # until the client's own deadline, longer than the tests' zombie timeout.
                        data, tail = _whole_messages(tail + data)
                        if held or self._lose_commit_reply.is_set():
                            held += data
                            verdict = _reply_verdict(held) if held else None
                            if verdict is None:
                                continue  # the reply is not complete yet
                            if verdict and self._take_commit_reply():
                                return  # swallowed: `finally` closes both ends
                            data, held = held, b""
                        if not data:
                            continue
                    key.data.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            sel.close()
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()
            with self._lock:
                if (a, b) in self._pairs:
                    self._pairs.remove((a, b))


def _whole_messages(buf: bytes) -> tuple[bytes, bytes]:
    """Split a server-to-client stream that starts at a message boundary into its whole messages and
    the start of the next one."""
    at = 0
    while at + 5 <= len(buf):
        end = at + 1 + int.from_bytes(buf[at + 1 : at + 5], "big")
        if end > len(buf):
            break
        at = end
    return buf[:at], buf[at:]


def _reply_verdict(buf: bytes) -> bool | None:
    """For a server-to-client stream that starts at a message boundary: None while it does not end with
    a whole ReadyForQuery message; then whether it reports a committed command (a CommandComplete and
    the session idle again)."""
    types, at = [], 0
    while at + 5 <= len(buf):
        size = int.from_bytes(buf[at + 1 : at + 5], "big")
        if at + 1 + size > len(buf):
            return None
        types.append(buf[at : at + 1])
        at += 1 + size
    if at != len(buf) or not types:
        return None
    if types[-1] != b"Z":
        # Only asynchronous messages (a NOTIFY to a listening session, a notice, a parameter change):
        # no reply is under way, so they pass at once.
        return False if set(types) <= _ASYNC else None
    return b"C" in types and buf[-1:] == b"I"
