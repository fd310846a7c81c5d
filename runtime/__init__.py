"""Kittiwake's domain logic: schemas, inbox rules, projection, context, tools.

Nothing here imports ``actors``, ``storage`` or ``gateway``.
"""

from runtime._ids import ID_PATTERNS as ID_PATTERNS
from runtime._ids import IdGenerator as IdGenerator
from runtime._ids import IdPrefix as IdPrefix
from runtime._ids import is_valid_id as is_valid_id
