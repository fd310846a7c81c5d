"""``python -m gateway.sdk``: regenerate ``sdk/python/kittiwake_sdk``'s generated modules."""

import trio

from gateway.sdk._write import write_sdk


def main() -> None:
    changed = trio.run(write_sdk)
    print("kittiwake_sdk: " + (", ".join(changed) + " regenerated" if changed else "up to date"))


if __name__ == "__main__":
    main()
