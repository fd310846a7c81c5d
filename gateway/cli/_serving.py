"""What ``kittiwake serve`` and ``kittiwake web`` tell the person who started them: the web
app's page opened (or its address), and a warning when serving beyond localhost without a
password."""

from __future__ import annotations

__all__ = ["open_page", "warn_open"]


def open_page(url: str, open_browser: bool) -> int:
    """Open the web app at *url* in the desktop's browser (when *open_browser*), saying so."""
    from gateway.web import open_in_browser

    if open_browser and open_in_browser(url):
        print(f"kittiwake: opened {url} in the browser", flush=True)
    else:
        print(f"kittiwake: the web app is at {url}", flush=True)
    return 0


def warn_open(hostname: str, password: str | None) -> None:
    """Warn when serving beyond localhost without a password."""
    if hostname not in ("127.0.0.1", "localhost", "::1") and not password:
        print("kittiwake: warning: listening beyond localhost without a password")
