"""Session titles, sans-IO: the placeholder title and the small-model title request."""

from runtime.titles._titles import MAX_TITLE_CHARS as MAX_TITLE_CHARS
from runtime.titles._titles import TITLE_PROMPT as TITLE_PROMPT
from runtime.titles._titles import TitleLimits as TitleLimits
from runtime.titles._titles import clean_title as clean_title
from runtime.titles._titles import default_title as default_title
from runtime.titles._titles import needs_title as needs_title
from runtime.titles._titles import title_request as title_request

__all__ = [
    "MAX_TITLE_CHARS",
    "TITLE_PROMPT",
    "TitleLimits",
    "clean_title",
    "default_title",
    "needs_title",
    "title_request",
]
