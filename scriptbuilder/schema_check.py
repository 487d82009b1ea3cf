"""Validate JSON data against the shipped schemas, without pydantic.

Covers the part of JSON Schema that pydantic writes for our models: ``type``,
``anyOf``, ``enum``/``const``, ``minimum``/``maximum``, ``$ref`` to ``$defs``,
``properties``/``required``/``additionalProperties``, ``items`` and
``default``. Validation returns a copy with every default filled in (an
object property without a default gets its sub-schema's defaults), wrapped in
:class:`Record` so fields read as attributes, as on the pydantic models.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


class SchemaError(ValueError):
    """``path`` names the field (``env_check.gpus_per_node``); ``problem`` says what is wrong."""

    def __init__(self, path: str, problem: str, kind: str) -> None:
        super().__init__(f"{path or '<root>'}: {problem}")
        self.path = path
        self.problem = problem
        self.kind = kind


class Record:
    """Read-only attribute view of a validated JSON object; nested objects are
    Records too, made once. ``data`` is the plain dict."""

    def __init__(self, data: dict[str, Any]) -> None:
        attrs = self.__dict__
        attrs.update(data)
        for name, value in data.items():
            if isinstance(value, (dict, list)):
                attrs[name] = _view(value)
        attrs["data"] = data

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and other.data == self.data

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Record({self.data!r})"

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...


def _view(value: Any) -> Any:
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return [_view(v) for v in value]
    return value


def _type_ok(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    return isinstance(value, _TYPES[name])


def _describe(schema: dict[str, Any], root: dict[str, Any]) -> str:
    schema = _resolve(schema, root)
    if "anyOf" in schema:
        return " or ".join(_describe(s, root) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    return str(schema.get("type", "any value"))


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    name = ref.rsplit("/", 1)[-1]
    merged = {**root["$defs"][name], **{k: v for k, v in schema.items() if k != "$ref"}}
    return merged


#: Schemas (by id; the shipped ones live as long as the process) that accept
#: ``None`` or plain values of these types and nothing else to check.
_PLAIN_OR_NULL: dict[int, tuple[type, ...] | None] = {}
_PLAIN_KINDS = {"string": (str,), "boolean": (bool,)}


def _plain_or_null(schema: dict[str, Any]) -> tuple[type, ...] | None:
    key = id(schema)
    if key not in _PLAIN_OR_NULL:
        options = schema.get("anyOf", ())
        kinds = [o.get("type", "") for o in options if set(o) == {"type"}]
        simple = len(kinds) == len(options) == 2 and "null" in kinds
        other = kinds[kinds.index("null") - 1] if simple else ""
        _PLAIN_OR_NULL[key] = _PLAIN_KINDS.get(other)
    return _PLAIN_OR_NULL[key]


def _check(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str) -> Any:
    plain = _plain_or_null(schema)
    if plain is not None and (value is None or isinstance(value, plain)):
        return value
    schema = _resolve(schema, root)
    if "anyOf" in schema:
        errors = []
        for option in schema["anyOf"]:
            try:
                return _check(value, option, root, path)
            except SchemaError as exc:
                errors.append(exc)
        # An option whose type matched says best what is wrong (a range, a nested field).
        closest = [e for e in errors if e.path != path or e.kind != "type"]
        if len(closest) == 1:
            raise closest[0]
        raise SchemaError(path, f"expected {_describe(schema, root)}, got {value!r}", "type")
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaError(path, f"expected {_describe(schema, root)}, got {value!r}", "enum")
    if "const" in schema and value != schema["const"]:
        raise SchemaError(path, f"expected {schema['const']!r}, got {value!r}", "enum")
    kind = schema.get("type")
    if kind is not None and not _type_ok(value, kind):
        raise SchemaError(path, f"expected {kind}, got {value!r}", "type")
    if kind in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise SchemaError(path, f"must be at least {schema['minimum']}, got {value}", "range")
        if "maximum" in schema and value > schema["maximum"]:
            raise SchemaError(path, f"must be at most {schema['maximum']}, got {value}", "range")
    if kind == "array" and "items" in schema:
        return [_check(v, schema["items"], root, f"{path}.{i}") for i, v in enumerate(value)]
    if kind == "object" or "properties" in schema:
        return _check_object(value, schema, root, path)
    return value


class _ObjectPlan:
    """What checking one object schema needs, worked out once per schema.

    ``fast`` maps a property to the exact value types (and, for an ``enum``, the
    values) that pass with nothing else to check; any other value, a missing
    required field or an unknown one takes :func:`_check_object_slowly`, which
    gives the same result or the error. ``copies`` are the properties whose
    default is a list or dict (copied per object); ``objects`` those without a
    default whose object schema fills in its own defaults. ``complete`` is false
    when an absent property would be left out, which only the full path does."""

    __slots__ = ("complete", "copies", "defaults", "fast", "names", "objects", "required")

    def __init__(self, schema: dict[str, Any], root: dict[str, Any]) -> None:
        properties: dict[str, Any] = schema["properties"]
        self.names = frozenset(properties)
        self.required = frozenset(schema.get("required", ()))
        self.defaults: dict[str, Any] = {}
        self.copies: list[tuple[str, Any]] = []
        self.objects: list[tuple[str, dict[str, Any]]] = []
        self.fast: dict[str, tuple[frozenset[type], frozenset[Any] | None]] = {}
        self.complete = True
        for name, sub in properties.items():
            self.defaults[name] = sub.get("default")
            self.fast[name] = _fast_test(sub)
            if "default" in sub:
                if isinstance(sub["default"], (list, dict)):
                    self.copies.append((name, sub["default"]))
            elif name not in self.required:
                resolved = _resolve(sub, root)
                if resolved.get("type") == "object" or "properties" in resolved:
                    self.objects.append((name, resolved))
                else:
                    self.complete = False


def _fast_test(schema: dict[str, Any]) -> tuple[frozenset[type], frozenset[Any] | None]:
    """Types (and enum values) a property accepts with nothing else to check."""
    plain = _plain_or_null(schema)
    if plain is not None:
        return frozenset((*plain, type(None))), None
    keys = set(schema) - {"title", "description", "default"}
    if schema.get("type") == "string" and keys in ({"type"}, {"type", "enum"}):
        enum = schema.get("enum")
        return frozenset((str,)), None if enum is None else frozenset(enum)
    if {"type": "null"} in schema.get("anyOf", ()):
        return frozenset((type(None),)), None
    return frozenset(), None


_PLANS: dict[int, tuple[dict[str, Any], _ObjectPlan | None]] = {}


def _plan(schema: dict[str, Any], root: dict[str, Any]) -> _ObjectPlan | None:
    """The plan for a closed object schema (``additionalProperties: false``),
    remembered per schema object (the entry keeps it alive)."""
    hit = _PLANS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    plan = None
    if schema.get("additionalProperties") is False and "properties" in schema:
        plan = _ObjectPlan(schema, root)
        if not plan.complete:
            plan = None
    if len(_PLANS) >= 64:
        _PLANS.clear()
    _PLANS[id(schema)] = (schema, plan)
    return plan


def _check_object(
    value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], path: str
) -> dict[str, Any]:
    plan = _plan(schema, root)
    if plan is None or not plan.names.issuperset(value) or not plan.required <= value.keys():
        return _check_object_slowly(value, schema, root, path)
    out = dict(plan.defaults)
    fast = plan.fast
    for name, item in value.items():
        types, allowed = fast[name]
        if type(item) not in types or (allowed is not None and item not in allowed):
            item = _check(item, schema["properties"][name], root, _join(path, name))
        out[name] = item
    for name, default in plan.copies:
        if name not in value:
            out[name] = copy.deepcopy(default)
    for name, sub in plan.objects:
        if name not in value:
            out[name] = _check_object({}, sub, root, _join(path, name))
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _check_object_slowly(
    value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], path: str
) -> dict[str, Any]:
    properties: dict[str, Any] = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    for name in schema.get("required", ()):
        if name not in value:
            raise SchemaError(prefix + name, "is required", "missing")
    if schema.get("additionalProperties") is False:
        for name in value:
            if name not in properties:
                known = ", ".join(properties)
                raise SchemaError(prefix + name, f"is unknown; known fields: {known}", "extra")
    out: dict[str, Any] = {}
    for name, sub in properties.items():
        if name in value:
            out[name] = _check(value[name], sub, root, prefix + name)
        elif "default" in sub:
            default = sub["default"]
            out[name] = copy.deepcopy(default) if isinstance(default, (list, dict)) else default
        elif name not in schema.get("required", ()):
            resolved = _resolve(sub, root)
            if resolved.get("type") == "object" or "properties" in resolved:
                out[name] = _check_object({}, resolved, root, prefix + name)
    for name, item in value.items():
        if name not in properties:
            out[name] = item
    return out


def validate(value: Any, schema: dict[str, Any]) -> Record:
    """``value`` checked against ``schema``, with defaults filled in."""
    if not isinstance(value, dict):
        raise SchemaError("", f"expected an object, got {type(value).__name__}", "type")
    return Record(_check_object(value, schema, schema, ""))
