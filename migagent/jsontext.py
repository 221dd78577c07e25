"""JSON written by someone else (a Node's annotations, a ConfigMap, a state file), decoded with one
refusal more than `json.loads` has.

Text nested deeper than the decoder may recurse (`[[[[...` 100,000 deep fits in a 256 KiB annotation)
makes `json.loads` raise RecursionError, which is not a ValueError: every `except ValueError` that
turns malformed text into "unreadable" missed it, and the reader ended in an internal error. Here it
is a ValueError like any other malformed text. ruff's banned-api rule keeps `json.loads` out of the
product so that no reader is written without it.
"""

from __future__ import annotations

import json
from typing import Any


def decode_json(text: str | bytes) -> Any:
    try:
        return json.loads(text)  # noqa: TID251  # the one place the product calls it
    except RecursionError:
        raise ValueError("JSON nested deeper than the decoder allows") from None
