import trio


async def test_trio_mode_runs() -> None:
    await trio.sleep(0)
