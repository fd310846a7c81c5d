"""SSE framing."""

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
