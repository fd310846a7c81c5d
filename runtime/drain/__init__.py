"""Session Drain, sans-IO: the planner that sequences one drain as pure decisions, and
the lane that coordinates a session's drains (wake coalescing, run upgrades, interrupts).

See ``docs/execution.md``; the SessionActor performs the effects.
"""

from __future__ import annotations

from runtime.drain._coordinator import WAKE_ANY as WAKE_ANY
from runtime.drain._coordinator import DrainMode as DrainMode
from runtime.drain._coordinator import Lane as Lane
from runtime.drain._coordinator import LaneAction as LaneAction
from runtime.drain._drain import Blocked as Blocked
from runtime.drain._drain import Compact as Compact
from runtime.drain._drain import Compacted as Compacted
from runtime.drain._drain import DrainEffect as DrainEffect
from runtime.drain._drain import DrainInput as DrainInput
from runtime.drain._drain import DrainPlan as DrainPlan
from runtime.drain._drain import Fail as Fail
from runtime.drain._drain import Idle as Idle
from runtime.drain._drain import Open as Open
from runtime.drain._drain import OverBudget as OverBudget
from runtime.drain._drain import Promote as Promote
from runtime.drain._drain import Promoted as Promoted
from runtime.drain._drain import RequestTurn as RequestTurn
from runtime.drain._drain import StepLimitExceeded as StepLimitExceeded
from runtime.drain._drain import TurnEnded as TurnEnded
from runtime.drain._drain import begin_drain as begin_drain
from runtime.drain._drain import plan as plan

__all__ = [
    "Blocked",
    "Compact",
    "Compacted",
    "DrainEffect",
    "DrainInput",
    "DrainMode",
    "DrainPlan",
    "Fail",
    "Idle",
    "Lane",
    "LaneAction",
    "Open",
    "OverBudget",
    "Promote",
    "Promoted",
    "RequestTurn",
    "StepLimitExceeded",
    "TurnEnded",
    "WAKE_ANY",
    "begin_drain",
    "plan",
]
