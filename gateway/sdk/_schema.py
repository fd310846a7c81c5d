"""From OpenAPI schemas to Python: the SDK's models as msgspec Structs.

Each component a selected operation reaches becomes one frozen Struct. A discriminated
``anyOf`` (the route table's tagged unions: messages by ``type``, tool states by ``status``)
becomes a union of Structs tagged the same way, so msgspec decodes it by its tag in one pass;
the tag property leaves the Struct's fields. Property names become snake_case attributes,
renamed back to their JSON names on the wire.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

__all__ = ["Models", "python_name"]

_REF_PREFIX: Final = "#/components/schemas/"
_SCALARS: Final = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


def python_name(name: str) -> str:
    """``projectID`` -> ``project_id``, ``_tag`` -> ``tag``, ``from`` -> ``from_``."""
    name = name.lstrip("_")
    name = re.sub(r"ID(?=[A-Z]|$)", "Id", name)
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower().replace("-", "_")
    return name + "_" if keyword.iskeyword(name) else name


def ref_name(ref: str) -> str:
    if not ref.startswith(_REF_PREFIX):
        raise ValueError(f"not a component reference: {ref}")
    return ref[len(_REF_PREFIX) :]


class Models:
    """The Structs that the annotations asked of it (``annotation``) need, written out by
    ``source``. Raises ``ValueError`` for a schema it cannot type (a component tagged two
    ways, a reference outside the components)."""

    def __init__(self, components: Mapping[str, Any]) -> None:
        self._components = components
        self._used: dict[str, None] = {}
        self._tags: dict[str, tuple[str, str]] = {}

    def annotation(self, schema: Mapping[str, Any]) -> str:
        """The Python type of *schema*, noting the components it needs."""
        if "$ref" in schema:
            return self._use(ref_name(schema["$ref"]))
        if "enum" in schema:
            return "Literal[" + ", ".join(repr(v) for v in schema["enum"]) + "]"
        if "anyOf" in schema:
            return self._union(schema)
        kind = schema.get("type")
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "null":
            return "None"
        if kind == "array":
            if "prefixItems" in schema:
                items = ", ".join(self.annotation(s) for s in schema["prefixItems"])
                return f"tuple[{items}]"
            return f"list[{self.annotation(schema.get('items', {}))}]"
        if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
            return f"dict[str, {self.annotation(schema['additionalProperties'])}]"
        if kind == "object":
            return "dict[str, Any]"
        return "Any"

    def _union(self, schema: Mapping[str, Any]) -> str:
        members = schema["anyOf"]
        discriminator = schema.get("discriminator")
        if discriminator is not None:
            field = discriminator["propertyName"]
            for tag, ref in discriminator["mapping"].items():
                name = ref_name(ref)
                if self._tags.setdefault(name, (field, tag)) != (field, tag):
                    raise ValueError(f"{name} is tagged two ways")
            return " | ".join(self.annotation(m) for m in members)
        typed = [self.annotation(m) for m in members]
        structs = [t for t in typed if t in self._components]
        if len(structs) > 1:  # untagged objects: msgspec cannot tell them apart
            return "Any"
        return " | ".join(dict.fromkeys(typed))

    def _use(self, name: str) -> str:
        if name not in self._components:
            raise ValueError(f"no component {name}")
        if name not in self._used:
            self._used[name] = None
            self._fields(name)  # notes the components its fields need, recursively
        return name

    def _fields(self, name: str) -> list[tuple[str, str, str, str | None]]:
        """(attribute, JSON name, annotation, default source or None) of each field,
        required ones first; the tag property is left out."""
        schema = self._components[name]
        required = set(schema.get("required", ()))
        tag = self._tags.get(name)
        out: list[tuple[str, str, str, str | None]] = []
        for json_name, prop in schema.get("properties", {}).items():
            if tag is not None and json_name == tag[0]:
                continue
            kind = self.annotation(prop)
            default: str | None = None
            if "default" in prop and not isinstance(prop["default"], dict):
                default = _default(prop["default"])
            elif json_name not in required:
                default = "None"
                kind = kind if kind == "Any" or "None" in kind.split(" | ") else kind + " | None"
            out.append((python_name(json_name), json_name, kind, default))
        return sorted(out, key=lambda f: f[3] is not None)

    def body_fields(self, name: str) -> list[tuple[str, str, str | None]]:
        """(attribute, annotation, default source) of a request body's fields."""
        self._use(name)
        return [(attr, kind, default) for attr, _, kind, default in self._fields(name)]

    def names(self) -> list[str]:
        return sorted(self._used)

    def needs(self, name: str) -> list[str]:
        """The components *name*'s schema refers to, directly."""
        return sorted({ref_name(ref) for ref in _refs(self._components[name])} - {name})

    def closure(self, roots: Iterator[str] | list[str]) -> list[str]:
        """*roots* and every component they need, directly or not, by name."""
        seen: dict[str, None] = {}
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name not in seen:
                seen[name] = None
                stack.extend(self.needs(name))
        return sorted(seen)

    def source(self, names: list[str]) -> Iterator[str]:
        """The Struct definitions of *names*, in that order."""
        for name in names:
            schema = self._components[name]
            fields = self._fields(name)
            options = ["frozen=True", "kw_only=True", "omit_defaults=True"]
            tag = self._tags.get(name)
            if tag is not None:
                options += [f"tag_field={tag[0]!r}", f"tag={tag[1]!r}"]
            renamed = {attr: wire for attr, wire, _, _ in fields if attr != wire}
            if renamed:
                options.append(f"rename={renamed!r}")
            yield f"\n\nclass {name}(msgspec.Struct, {', '.join(options)}):"
            doc = (schema.get("description") or schema.get("title") or name).strip()
            first = doc.split("\n\n")[0].replace("\n", " ").replace("``", "`")
            first = " ".join(first.split()).replace('"""', "'''").replace("\\", "\\\\")
            yield f'    """{first}"""\n'
            for attr, _, kind, default in fields:
                yield f"    {attr}: {kind}" + ("" if default is None else f" = {default}")
            if not fields:
                yield "    pass"


def _refs(schema: Any) -> Iterator[str]:
    """Every ``$ref`` inside *schema*."""
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _refs(item)


def _default(value: Any) -> str:
    """A field's default; a dict default (a nested Struct's) is read as absent instead."""
    if isinstance(value, list):
        return (
            f"msgspec.field(default_factory=lambda: {value!r})"
            if value
            else ("msgspec.field(default_factory=list)")
        )
    return repr(value)
