"""SSE framing of one long line fed in small chunks (``runtime.llm.SSEDecoder``).

A provider can send a single ``data:`` line of megabytes (a large tool-call argument, an
image) that the network delivers in small pieces. For each line length and chunk size the
line is fed, then ended, and the seconds and the time per byte are printed: linear
framing keeps the time per byte the same as the line grows, whatever the chunk size.

Run: ``.venv/bin/python bench/sse.py`` (``--lengths`` in bytes, ``--chunks`` in bytes,
``--repeats``).
"""

from __future__ import annotations

import argparse
import statistics
import time

from runtime.llm import SSEDecoder


def feed_once(length: int, chunk: int) -> float:
    """Seconds to frame a *length*-byte data line fed in *chunk*-byte pieces (each piece
    sliced off the line as it is fed, which the time includes)."""
    line = b"data: " + b"x" * length + b"\n\n"
    decoder = SSEDecoder(max_frame_bytes=length + 64)
    frames = []
    start = time.perf_counter()
    for i in range(0, len(line), chunk):  # sliced here: 10 MB of 1-byte pieces is 340 MB
        frames += decoder.feed(line[i : i + chunk])
    took = time.perf_counter() - start
    assert len(frames) == 1 and len(frames[0].data) == length
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="100000,1000000,10000000")
    parser.add_argument("--chunks", default="1,64,16384")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'line bytes':>12}{'chunk':>8}{'median s':>12}{'ns/byte':>10}")
    for length in (int(x) for x in args.lengths.split(",")):
        for chunk in (int(x) for x in args.chunks.split(",")):
            took = statistics.median(feed_once(length, chunk) for _ in range(args.repeats))
            print(f"{length:>12,}{chunk:>8}{took:>12.3f}{took / length * 1e9:>10.1f}", flush=True)


if __name__ == "__main__":
    main()
