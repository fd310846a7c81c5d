from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage._journal import (
    Journal,
    JournalCorrupt,
    JournalError,
    JournalFiles,
    JournalHeld,
    JournalStatistics,
)

HEADER_SIZE = 18


def payload(lsn: int, size: int = 40) -> bytes:
    return (b"record-%08d-" % lsn).ljust(size, b"x")


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("journal-*.seg"))


def fill(journal: Journal, batches: int, batch_size: int) -> list[bytes]:
    written = []
    for _ in range(batches):
        batch = [payload(journal.next_lsn + i) for i in range(batch_size)]
        journal.append(batch)
        written.extend(batch)
    return written


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


class TestAppendAndRead:
    def test_round_trip_across_rotated_segments(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=500) as journal:
            written = fill(journal, batches=20, batch_size=3)
            assert journal.next_lsn == 60
            assert [p for _, p in journal.read()] == written
            assert [lsn for lsn, _ in journal.read()] == list(range(60))
            assert list(journal.read(37)) == [(i, written[i]) for i in range(37, 60)]
            assert list(journal.read(60)) == []
        files = segment_files(tmp_path)
        assert len(files) > 5
        assert files[0].name == "journal-0000000000000000.seg"
        assert all(f.stat().st_size <= 500 for f in files)

    def test_append_returns_last_lsn_of_batch(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path) as journal:
            assert journal.append([b"a"]) == 0
            assert journal.append([b"b", b"c", b"d"]) == 3
            assert journal.append([b""]) == 4
            assert list(journal.read()) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"")]

    def test_a_batch_larger_than_a_segment_stays_whole(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=100) as journal:
            journal.append([b"small"])
            journal.append([payload(1, 300), payload(2, 300)])
            journal.append([b"after"])
        assert [f.name for f in segment_files(tmp_path)] == [
            "journal-0000000000000000.seg",
            "journal-0000000000000001.seg",
            "journal-0000000000000003.seg",
        ]

    def test_lsns_continue_after_reopen(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=300) as journal:
            fill(journal, batches=7, batch_size=2)
        with Journal.open(tmp_path, segment_max_bytes=300) as journal:
            assert journal.next_lsn == 14
            assert journal.append([b"next"]) == 14
            assert [lsn for lsn, _ in journal.read()] == list(range(15))

    def test_read_bound_is_taken_at_call_time(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=200) as journal:
            fill(journal, batches=2, batch_size=2)
            records = journal.read()
            fill(journal, batches=4, batch_size=2)
            assert [lsn for lsn, _ in records] == [0, 1, 2, 3]

    def test_a_held_directory_names_its_holder(self, tmp_path: Path) -> None:
        Journal.check_free(tmp_path / "absent")  # nothing holds what does not exist
        journal = Journal.open(tmp_path)
        with pytest.raises(JournalHeld) as held:
            Journal.check_free(tmp_path)
        assert held.value.holder == os.getpid() and held.value.directory == tmp_path
        assert str(held.value) == f"another open journal holds {tmp_path} (process {os.getpid()})"
        with pytest.raises(JournalHeld):
            Journal.open(tmp_path)
        (tmp_path / "holder").write_text("garbage")  # a record no journal wrote: unknown
        with pytest.raises(JournalHeld) as unknown:
            Journal.check_free(tmp_path)
        assert unknown.value.holder is None
        assert str(unknown.value) == f"another open journal holds {tmp_path}"
        journal.close()
        Journal.check_free(tmp_path)
        with Journal.open(tmp_path):
            assert (tmp_path / "holder").read_text() == f"{os.getpid()}\n"

    def test_misuse_is_refused(self, tmp_path: Path) -> None:
        journal = Journal.open(tmp_path)
        with pytest.raises(ValueError, match="at least one payload"):
            journal.append([])
        with pytest.raises(ValueError, match="outside"):
            journal.read(1)
        with pytest.raises(JournalError, match="another open journal"):
            Journal.open(tmp_path)
        journal.close()
        journal.close()
        with pytest.raises(JournalError, match="closed"):
            journal.append([b"x"])
        with Journal.open(tmp_path) as again:
            assert again.next_lsn == 0

    def test_statistics_count_appends_and_fsyncs(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=200) as journal:
            fill(journal, batches=6, batch_size=2)
            stats = journal.statistics()
        assert isinstance(stats, JournalStatistics)
        assert stats.next_lsn == 12
        assert stats.appends == 6
        assert stats.fsyncs == 6
        assert stats.segments == len(segment_files(tmp_path))
        assert stats.bytes == sum(f.stat().st_size for f in segment_files(tmp_path))
        assert stats.bytes == 12 * (HEADER_SIZE + 40)
        assert stats.last_append_seconds > 0
        with Journal.open(tmp_path, fsync=False) as journal:
            journal.append([b"x"])
            assert journal.statistics().fsyncs == 0


class TestRepairOnOpen:
    def test_torn_tail_is_truncated_and_appends_continue(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path) as journal:
            written = fill(journal, batches=5, batch_size=1)
        (last,) = segment_files(tmp_path)
        size = last.stat().st_size
        os.truncate(last, size - 7)
        with Journal.open(tmp_path) as journal:
            assert journal.next_lsn == 4
            assert last.stat().st_size == size - (HEADER_SIZE + 40)
            assert journal.append([b"again"]) == 4
            assert [p for _, p in journal.read()] == [*written[:4], b"again"]

    def test_appended_garbage_is_truncated(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path) as journal:
            written = fill(journal, batches=3, batch_size=2)
        (last,) = segment_files(tmp_path)
        size = last.stat().st_size
        with last.open("ab") as file:
            file.write(b"\xb1\x01garbage that looks a bit like a header")
        with Journal.open(tmp_path) as journal:
            assert journal.next_lsn == 6
            assert last.stat().st_size == size
            journal.append([b"more"])
            assert [p for _, p in journal.read()] == [*written, b"more"]

    def test_partly_written_batch_is_dropped_whole(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path) as journal:
            fill(journal, batches=1, batch_size=2)
            fill(journal, batches=1, batch_size=4)
        (last,) = segment_files(tmp_path)
        # Keep two complete records of the second batch, cut the third in half.
        os.truncate(last, 4 * (HEADER_SIZE + 40) + 10)
        with Journal.open(tmp_path) as journal:
            assert journal.next_lsn == 2
            assert [lsn for lsn, _ in journal.read()] == [0, 1]

    def test_crc_mismatch_in_last_record_drops_it(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=300) as journal:
            written = fill(journal, batches=10, batch_size=1)
        last = segment_files(tmp_path)[-1]
        flip_byte(last, last.stat().st_size - 3)
        with Journal.open(tmp_path, segment_max_bytes=300) as journal:
            assert journal.next_lsn == 9
            assert [p for _, p in journal.read()] == written[:9]
            assert journal.append([b"replacement"]) == 9

    def test_damage_before_complete_batches_of_last_segment_is_corrupt(
        self, tmp_path: Path
    ) -> None:
        with Journal.open(tmp_path) as journal:
            fill(journal, batches=4, batch_size=1)
        (last,) = segment_files(tmp_path)
        flip_byte(last, HEADER_SIZE + 5)  # payload of LSN 0, three whole batches after it
        with pytest.raises(JournalCorrupt, match="LSN 0"):
            Journal.open(tmp_path)
        assert last.stat().st_size == 4 * (HEADER_SIZE + 40)

    def test_damage_in_earlier_segment_is_corrupt(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=300) as journal:
            fill(journal, batches=10, batch_size=1)
        first = segment_files(tmp_path)[0]
        flip_byte(first, first.stat().st_size - 3)
        with Journal.open(tmp_path, segment_max_bytes=300) as journal:
            assert journal.next_lsn == 10
            with pytest.raises(JournalCorrupt, match="damaged or missing record"):
                list(journal.read())
            with pytest.raises(JournalCorrupt):
                journal.verify()
            assert [lsn for lsn, _ in journal.read(5)] == list(range(5, 10))

    def test_flipped_flag_byte_is_caught(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=300) as journal:
            fill(journal, batches=10, batch_size=1)
        first = segment_files(tmp_path)[0]
        flip_byte(first, 1)
        with Journal.open(tmp_path) as journal, pytest.raises(JournalCorrupt):
            journal.verify()

    def test_missing_segment_is_corrupt(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=200) as journal:
            fill(journal, batches=10, batch_size=1)
        segment_files(tmp_path)[1].unlink()
        with Journal.open(tmp_path) as journal, pytest.raises(JournalCorrupt, match="LSN"):
            journal.verify()

    def test_segment_whose_name_disagrees_with_its_records_is_corrupt(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=200) as journal:
            fill(journal, batches=10, batch_size=1)
        last = segment_files(tmp_path)[-1]
        last.rename(tmp_path / "journal-0000000000000099.seg")
        with pytest.raises(JournalCorrupt, match="does not start at LSN 99"):
            Journal.open(tmp_path)


class TestPreallocation:
    def test_records_overwrite_zeros_and_a_closed_segment_is_cut_back(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, preallocate_bytes=4096) as journal:
            written = fill(journal, batches=3, batch_size=2)
            (active,) = segment_files(tmp_path)
            size = journal.statistics().bytes
            assert active.stat().st_size > size + 3000  # zeros ahead of the records
            assert active.read_bytes()[size:].count(0) == active.stat().st_size - size
            written += fill(journal, batches=100, batch_size=2)  # runs out, grows again
            assert [p for _, p in journal.read()] == written
        assert active.stat().st_size == journal.statistics().bytes

    def test_a_killed_process_leaves_zeros_that_reopen_drops(self, tmp_path: Path) -> None:
        journal = Journal.open(tmp_path, preallocate_bytes=4096)
        written = fill(journal, batches=5, batch_size=3)
        size = journal.statistics().bytes
        copy = tmp_path / "copy"  # the files as a kill -9 leaves them
        copy.mkdir()
        for path in segment_files(tmp_path):
            (copy / path.name).write_bytes(path.read_bytes())
        journal.close()
        with Journal.open(copy) as reopened:
            assert [p for _, p in reopened.read()] == written
            assert segment_files(copy)[0].stat().st_size == size
            more = fill(reopened, batches=1, batch_size=1)
            assert [p for _, p in reopened.read()] == written + more

    def test_zeros_left_after_a_closed_segment_are_its_end(self, tmp_path: Path) -> None:
        """A crash after a rotation, before the cut-back reached the disk."""
        with Journal.open(tmp_path, segment_max_bytes=300) as journal:
            written = fill(journal, batches=6, batch_size=2)
        first = segment_files(tmp_path)[0]
        first.write_bytes(first.read_bytes() + bytes(100_000))
        with Journal.open(tmp_path) as journal:
            assert [p for _, p in journal.read()] == written
            assert journal.verify() == len(written)
        first.write_bytes(first.read_bytes() + b"\x01")
        with Journal.open(tmp_path) as journal, pytest.raises(JournalCorrupt, match="bytes after"):
            journal.verify()

    def test_no_preallocation_grows_with_each_append(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, preallocate_bytes=0) as journal:
            fill(journal, batches=3, batch_size=2)
            (active,) = segment_files(tmp_path)
            assert active.stat().st_size == journal.statistics().bytes


class TestRelease:
    def test_release_deletes_only_covered_inactive_segments(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=3 * (HEADER_SIZE + 40)) as journal:
            fill(journal, batches=10, batch_size=1)
            names = [f.name for f in segment_files(tmp_path)]
            assert names == [f"journal-{n:016d}.seg" for n in (0, 3, 6, 9)]
            assert journal.release_through(4) == [tmp_path / names[0]]
            assert journal.first_lsn == 3
            assert journal.release_through(4) == []
            assert [lsn for lsn, _ in journal.read(3)] == list(range(3, 10))
            with pytest.raises(JournalError, match="released"):
                list(journal.read(2))
            assert journal.release_through(8) == [tmp_path / names[1], tmp_path / names[2]]
            assert [f.name for f in segment_files(tmp_path)] == [names[3]]
            with pytest.raises(ValueError, match="not below"):
                journal.release_through(10)
            assert journal.statistics().segments == 1
            assert journal.statistics().bytes == HEADER_SIZE + 40
            assert journal.append([b"x"]) == 10
        with Journal.open(tmp_path) as journal:
            assert journal.next_lsn == 11
            assert journal.verify() == 2

    def test_release_of_every_record_starts_an_empty_segment(self, tmp_path: Path) -> None:
        """A journal that never fills a segment (short-lived processes) still empties."""
        for round_ in range(3):
            with Journal.open(tmp_path) as journal:
                fill(journal, batches=5, batch_size=2)
                assert (journal.held_records, journal.held_bytes) == (10, 10 * (HEADER_SIZE + 40))
                old = segment_files(tmp_path)
                assert journal.release_through(journal.next_lsn - 1) == old
                assert (journal.held_records, journal.held_bytes) == (0, 0)
                assert journal.first_lsn == journal.next_lsn == 10 * (round_ + 1)
                assert [f.name for f in segment_files(tmp_path)] == [
                    f"journal-{journal.next_lsn:016d}.seg"
                ]
                assert journal.release_through(journal.next_lsn - 1) == []  # nothing held
        with Journal.open(tmp_path) as journal:
            assert (journal.first_lsn, journal.next_lsn, journal.verify()) == (30, 30, 0)
            assert journal.append([b"y"]) == 30

    def test_a_release_cut_short_leaves_a_journal_that_opens(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path, segment_max_bytes=2 * (HEADER_SIZE + 40)) as journal:
            written = fill(journal, batches=7, batch_size=1)
        names = [f.name for f in segment_files(tmp_path)]
        assert len(names) == 4
        (tmp_path / names[0]).unlink()  # a crash after the first of three deletions
        with Journal.open(tmp_path) as journal:
            assert journal.first_lsn == 2
            assert [p for _, p in journal.read(2)] == written[2:]
            released = journal.release_through(6)
            assert released == [tmp_path / n for n in names[1:]]
            assert (journal.first_lsn, journal.held_records) == (7, 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(
            st.lists(st.binary(max_size=120), min_size=1, max_size=8),
            st.booleans(),
        ),
        min_size=1,
        max_size=25,
    ),
    segment_max_bytes=st.integers(min_value=1, max_value=2000),
    start=st.integers(min_value=0, max_value=200),
)
def test_everything_appended_is_read_back(
    steps: list[tuple[list[bytes], bool]], segment_max_bytes: int, start: int
) -> None:
    expected: list[bytes] = []
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        journal = Journal.open(directory, segment_max_bytes=segment_max_bytes, fsync=False)
        try:
            for batch, reopen in steps:
                assert journal.append(batch) == len(expected) + len(batch) - 1
                expected.extend(batch)
                if reopen:
                    journal.close()
                    journal = Journal.open(
                        directory, segment_max_bytes=segment_max_bytes, fsync=False
                    )
                assert journal.next_lsn == len(expected)
            assert list(journal.read()) == list(enumerate(expected))
            first = min(start, len(expected))
            assert [p for _, p in journal.read(first)] == expected[first:]
        finally:
            journal.close()


CHILD = textwrap.dedent(
    """
    import random, sys
    from pathlib import Path
    from storage import Journal

    directory, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    with Journal.open(directory, segment_max_bytes=4096) as journal:
        print("open", journal.next_lsn, flush=True)
        while True:
            first = journal.next_lsn
            batch = [
                (b"lsn-%d-" % (first + i)).ljust(rng.randrange(10, 300), b".")
                for i in range(rng.randrange(1, 12))
            ]
            print("ack", journal.append(batch), flush=True)
    """
)


def is_expected_payload(lsn: int, data: bytes) -> bool:
    prefix = b"lsn-%d-" % lsn
    return data.startswith(prefix) and data[len(prefix) :].strip(b".") == b""


def test_sigkilled_writer_loses_no_acknowledged_record(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    acknowledged = -1
    for round_number in range(12):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path), str(rng.randrange(2**32))],
            stdout=subprocess.PIPE,
        )
        assert child.stdout is not None
        with child.stdout:
            opened = child.stdout.readline().split()
            assert opened[0] == b"open", f"seed {seed}"
            assert int(opened[1]) == acknowledged + 1, f"seed {seed} round {round_number}"
            for _ in range(rng.randrange(1, 60)):
                acknowledged = int(child.stdout.readline().split()[1])
            time.sleep(rng.random() * 0.01)
            child.send_signal(signal.SIGKILL)
            for line in child.stdout:
                if line.startswith(b"ack ") and line.endswith(b"\n"):
                    acknowledged = int(line.split()[1])
        assert child.wait() == -signal.SIGKILL
        with Journal.open(tmp_path, segment_max_bytes=4096) as journal:
            records = list(journal.read())
        lsns = [lsn for lsn, _ in records]
        assert lsns == list(range(len(records))), f"seed {seed}"
        assert len(records) > acknowledged, f"seed {seed} round {round_number}"
        assert all(is_expected_payload(lsn, data) for lsn, data in records), f"seed {seed}"
        acknowledged = len(records) - 1
    assert len(segment_files(tmp_path)) > 1


class _FailingFiles(JournalFiles):
    """Fails the next fdatasync, or reports a full disk on the next record write."""

    def __init__(self) -> None:
        self.fail_sync = False
        self.full = False

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        if self.fail_sync:
            raise OSError(errno.EIO, "Input/output error")
        os.fdatasync(fd)

    def pwrite(self, fd: int, data: Any, offset: int) -> int:  # type: ignore[override]
        if self.full and bytes(data[:1]) != b"\x00":
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.pwrite(fd, data, offset)


def test_appends_go_through_the_injected_file_operations(tmp_path: Path) -> None:
    files = _FailingFiles()
    with Journal.open(tmp_path, files=files) as journal:
        journal.append([b"kept"])
        files.full = True
        with pytest.raises(JournalError, match="No space left"):
            journal.append([b"refused"])
        files.full = False
        journal.append([b"after"])  # a failed write was cut back: the journal goes on
        files.fail_sync = True
        with pytest.raises(JournalError, match="fdatasync failed"):
            journal.append([b"unsynced"])
        with pytest.raises(JournalError, match="refuses appends"):
            journal.append([b"never"])
    with Journal.open(tmp_path) as reopened:
        payloads = [p for _, p in reopened.read()]
    assert payloads[:2] == [b"kept", b"after"]  # the unsynced batch may or may not be there
    assert b"refused" not in payloads and b"never" not in payloads


class _SyncLog(JournalFiles):
    """Records which files were fdatasynced and written, in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        self.log.append(("sync", os.readlink(f"/proc/self/fd/{fd}")))
        os.fdatasync(fd)

    def pwrite(self, fd: int, data: Any, offset: int) -> int:  # type: ignore[override]
        if bytes(data[:1]) != b"\x00":
            self.log.append(("write", os.readlink(f"/proc/self/fd/{fd}")))
        return os.pwrite(fd, data, offset)


def test_a_tail_a_failed_fdatasync_left_is_synced_before_the_next_segment(
    tmp_path: Path,
) -> None:
    files = _FailingFiles()
    with Journal.open(tmp_path, files=files, segment_max_bytes=400) as journal:
        journal.append([payload(0)])
        files.fail_sync = True
        with pytest.raises(JournalError, match="fdatasync failed"):
            journal.append([payload(1, size=300)])  # the pages stay in the file
    log = _SyncLog()
    with Journal.open(tmp_path, files=log, segment_max_bytes=400) as reopened:
        assert reopened.next_lsn == 2  # the unsynced batch is found and kept
        reopened.append([payload(2)])  # past the segment's size: a new segment
    first, second = (str(path) for path in segment_files(tmp_path))
    # The kept tail is made durable before anything lands in the next segment: a power
    # loss would otherwise cut LSN 1 out from under LSN 2, and the journal never opens.
    assert log.log[:2] == [("sync", first), ("write", second)]
    with Journal.open(tmp_path) as again:
        assert [lsn for lsn, _ in again.read()] == [0, 1, 2]
