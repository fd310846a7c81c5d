"""SSE framing."""

import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.llm import FrameTooLargeError, SSEDecoder, SSEFrame, encode_sse

RAW = (
    b": keep-alive comment\n"
    b"event: message_start\r\n"
    b'data: {"a":1}\r\n'
    b"\r\n"
    b"data: line one\n"
    b"data: line two\n"
    b"\n"
    b"event: ping\n"
    b"\n"
    b"data:nospace\n"
    b"\n"
    b"data: [DONE]\n"
)
EXPECTED = [
    SSEFrame(event="message_start", data='{"a":1}'),
    SSEFrame(data="line one\nline two"),
    SSEFrame(data="nospace"),
    SSEFrame(data="[DONE]"),
]


def decode_all(chunks, max_frame_bytes=1 << 20):
    decoder = SSEDecoder(max_frame_bytes=max_frame_bytes)
    frames = []
    for chunk in chunks:
        frames.extend(decoder.feed(chunk))
    return frames + decoder.close()


def test_fields_comments_crlf_and_unterminated_tail():
    assert decode_all([RAW]) == EXPECTED


@given(st.lists(st.integers(0, len(RAW)), max_size=12))
def test_any_chunking_gives_the_same_frames(cuts):
    points = sorted(set(cuts))
    chunks = [RAW[a:b] for a, b in zip([0, *points], [*points, len(RAW)], strict=True)]
    assert decode_all(chunks) == EXPECTED


@given(
    st.lists(
        st.builds(
            SSEFrame,
            data=st.text(
                st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]),
                min_size=1,
            ),
            event=st.none() | st.sampled_from(["a", "b"]),
        ),
        max_size=5,
    )
)
def test_encode_decode_round_trip(frames):
    assert decode_all([encode_sse(frames)]) == frames


def test_utf8_split_across_chunks():
    raw = "data: héllo ✓\n\n".encode()
    assert decode_all([raw[:8], raw[8:9], raw[9:]]) == [SSEFrame(data="héllo ✓")]


def test_oversized_line_and_frame_are_refused():
    with pytest.raises(FrameTooLargeError):
        decode_all([b"data: " + b"x" * 100], max_frame_bytes=50)
    with pytest.raises(FrameTooLargeError):
        decode_all([b"data: aaaaaaaaaaaaaaaaaaaa\n" * 5], max_frame_bytes=50)


def test_a_long_line_in_small_chunks_of_every_size_is_one_frame():
    text = "".join(chr(0x61 + i % 26) for i in range(300_000)) + "é✓"
    raw = b"event: big\r\ndata: " + text.encode() + b"\r\ndata: tail\r\n\r\ndata: next\n\n"
    chunks, start, size = [], 0, 1
    while start < len(raw):  # every size from 1 to 97 bytes, over and over
        chunks.append(raw[start : start + size])
        start, size = start + size, size % 97 + 1
    assert decode_all(chunks) == [
        SSEFrame(event="big", data=f"{text}\ntail"),
        SSEFrame(data="next"),
    ]


def copied_feeding(length: int) -> int:
    """Bytes a decoder allocates while a *length*-byte data line is fed one byte at a time
    (then ended), counting each feed's allocations of 1 KiB or more: the copies of the
    unfinished line. Allocation sizes do not depend on the machine's speed."""
    line = b"data: " + b"x" * length + b"\n\n"
    pieces = [line[i : i + 1] for i in range(len(line))]
    decoder = SSEDecoder(max_frame_bytes=1 << 24)
    frames: list[SSEFrame] = []
    copied = 0
    assert not tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        for piece in pieces:
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            frames += decoder.feed(piece)
            grown = tracemalloc.get_traced_memory()[1] - before
            copied += grown if grown >= 1024 else 0
    finally:
        tracemalloc.stop()
    assert frames == [SSEFrame(data="x" * length)]
    return copied


def test_a_line_fed_byte_by_byte_costs_work_linear_in_its_length():
    # Rebuilding the buffer on every chunk copied the line so far each time: about
    # length**2 / 2 bytes (8,000 times the line here). Growing it in place copies it a
    # few times in all: its amortised growth, the finished line, its text and the frame.
    length = 20_000
    assert copied_feeding(length) <= 8 * length
