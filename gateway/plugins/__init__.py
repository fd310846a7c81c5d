"""Plugins' room on the HTTP core: ``GET /plugin``, each plugin of a Location with its
state, its hooks and its last error; OpenCode's provider login routes (``GET
/provider/auth``, ``POST /provider/{providerID}/oauth/authorize|callback``) over the
plugins' ``auth`` hook."""

from gateway.plugins._routes import plugin_routes as plugin_routes

__all__ = ["plugin_routes"]
