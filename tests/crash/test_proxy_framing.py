"""The test proxy's framing of the server's stream (tests/crash/proxy.py): a reply is held from a message
boundary even when the server sent it in pieces, so a swallowed reply is judged on whole messages."""

from __future__ import annotations

from crash.proxy import _reply_verdict, _whole_messages


def msg(kind: bytes, body: bytes) -> bytes:
    return kind + (4 + len(body)).to_bytes(4, "big") + body


ROW = msg(b"D", b"\x00\x01" + b"x" * 9000)  # larger than one of PostgreSQL's 8 kB flushes
DONE = msg(b"C", b"SELECT 1\x00") + msg(b"Z", b"I")


def test_pieces_pass_as_whole_messages_only():
    stream = ROW + DONE
    first, tail = _whole_messages(stream[:8192])
    assert first == b"" and tail == stream[:8192]  # the row is not whole yet: nothing passes
    whole, tail = _whole_messages(tail + stream[8192:])
    assert whole == stream and tail == b""


def test_a_reply_held_from_a_boundary_is_judged_a_commit():
    whole, tail = _whole_messages(ROW + DONE[:3])
    assert whole == ROW and _reply_verdict(whole) is None  # no ReadyForQuery yet: still a reply under way
    rest, tail = _whole_messages(tail + DONE[3:])
    assert tail == b"" and _reply_verdict(whole + rest) is True


def test_mid_message_bytes_misframe_the_verdict():
    """Why the proxy frames: the same bytes judged from inside the row never reach a verdict (the old
    proxy then held the connection until the client's deadline)."""
    assert _reply_verdict((ROW + DONE)[8192:]) is None
