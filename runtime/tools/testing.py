"""Tools for tests: ``echo``, ``gated``, ``slow``, ``failing`` and a registry holding them."""

from runtime.tools._testing import EchoInput as EchoInput
from runtime.tools._testing import FailingInput as FailingInput
from runtime.tools._testing import GatedInput as GatedInput
from runtime.tools._testing import SlowInput as SlowInput
from runtime.tools._testing import TestingGates as TestingGates
from runtime.tools._testing import testing_registry as testing_registry
from runtime.tools._testing import testing_tools as testing_tools

__all__ = [
    "EchoInput",
    "FailingInput",
    "GatedInput",
    "SlowInput",
    "TestingGates",
    "testing_registry",
    "testing_tools",
]
