"""What an operator sees: the inspector page, its state and series, and the telemetry routes."""

from gateway.operator._inspector import INSPECTOR_HTML as INSPECTOR_HTML
from gateway.operator._telemetry import Samples as Samples
from gateway.operator._telemetry import operator_routes as operator_routes
from gateway.operator._telemetry import sample_forever as sample_forever
from gateway.operator._telemetry import telemetry_routes as telemetry_routes

__all__ = [
    "INSPECTOR_HTML",
    "Samples",
    "operator_routes",
    "sample_forever",
    "telemetry_routes",
]
