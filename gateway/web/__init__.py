"""The web app's room on the HTTP core: the page at ``/``, its hand-written JavaScript modules,
stylesheet, icon and web manifest under ``/web/``, each answered with a strict
Content-Security-Policy. The page is a client of the public API only (``/api/...`` and the
``/api/event`` stream); see ``docs/web.md``."""

from gateway.web._routes import CONTENT_SECURITY_POLICY as CONTENT_SECURITY_POLICY
from gateway.web._routes import WebAssets as WebAssets
from gateway.web._routes import open_in_browser as open_in_browser
from gateway.web._routes import web_routes as web_routes

__all__ = ["CONTENT_SECURITY_POLICY", "WebAssets", "open_in_browser", "web_routes"]
