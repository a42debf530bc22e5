"""``coerce_with_schema``: the lenient pre-pass (``pi_kernel.ai.tool.SchemaCoercer``) run on its own,
as the coercion tests drive it; validation itself builds one coercer per tool schema."""

from __future__ import annotations

import copy
from typing import Any

from jsonschema.validators import Draft202012Validator, validator_for

from pi_kernel.ai.tool import SchemaCoercer


def coerce_with_schema(value: Any, schema: Any, root_schema: Any = None, *, fill_defaults: bool = True) -> Any:
    """A coerced copy of ``value`` for ``schema`` (``$ref``s resolve in ``root_schema``); ``value`` is untouched."""
    root = schema if root_schema is None else root_schema
    cls = validator_for(root, Draft202012Validator) if isinstance(root, dict) else Draft202012Validator
    return SchemaCoercer(root, cls(root), fill_defaults=fill_defaults).coerce_in_place(copy.deepcopy(value), schema)
