"""The Python SDK's generator: ``kittiwake_sdk``'s generated modules from the OpenAPI
document of the gateway's route table (``python -m gateway.sdk``; ``make sdk``)."""

from gateway.sdk._generate import GENERATED as GENERATED
from gateway.sdk._generate import sdk_sources as sdk_sources
from gateway.sdk._write import SDK_PACKAGE as SDK_PACKAGE
from gateway.sdk._write import format_sources as format_sources
from gateway.sdk._write import route_document as route_document
from gateway.sdk._write import write_sdk as write_sdk

__all__ = [
    "GENERATED",
    "SDK_PACKAGE",
    "format_sources",
    "route_document",
    "sdk_sources",
    "write_sdk",
]
