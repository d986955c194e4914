"""The advertised tool: one flat input schema built from the per-action argument models, compact (agents read
every byte), and the description's retired-argument clause."""

from __future__ import annotations

from typing import Any

from mcp_types import Tool as MCPTool

from app.mcp import wire
from app.mcp.registry import ToolSpec


def mcp_tool(spec: ToolSpec) -> MCPTool:
    """The tool as `tools/list` lists it: the description with its retired arguments, the flat input schema."""
    return MCPTool(
        name=spec.name,
        description=spec.description + _retired_clause(spec),
        input_schema=build_input_schema(spec),
        output_schema=wire.OUTPUT_SCHEMA,
        annotations=spec.annotations,
    )


def _retired_clause(spec: ToolSpec) -> str:
    """The retired arguments and their replacements, from the migration texts ("x was removed; use y")."""
    names: list[str] = []
    for name, text in spec.retired.items():
        names.append(_retired_entry(name, text))
    for action, retired in spec.retired_per_action.items():
        names += [f"{action} {_retired_entry(name, text)}" for name, text in retired.items()]
    return f" Retired: {', '.join(names)}." if names else ""


def _retired_entry(name: str, text: str) -> str:
    replacement = text.partition("; use ")[2].split(" (", 1)[0]
    return f"{name}→{replacement}" if replacement else f"{name} (no replacement)"


def _compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop titles and the type an enum's values imply, collapse Optional[X] to X: agents read every byte."""
    schema = {key: value for key, value in schema.items() if key != "title"}
    if "default" in schema and schema["default"] is None:
        del schema["default"]
    any_of = schema.get("anyOf")
    if isinstance(any_of, list):
        non_null = [option for option in any_of if option.get("type") != "null"]
        if len(non_null) == 1:
            schema.pop("anyOf")
            schema.update(non_null[0])
    # Size guards (ids ≤ 64, paths ≤ 4096, …) stay enforced by the models; advertising them costs
    # every agent context tokens and guides nothing.
    if schema.get("minLength") == 1:
        del schema["minLength"]
    if isinstance(schema.get("maxLength"), int) and schema["maxLength"] >= 64:
        del schema["maxLength"]
    if isinstance(schema.get("maxItems"), int) and schema["maxItems"] >= 100:
        del schema["maxItems"]
    schema.pop("pattern", None)  # the models check patterns and say what they expect
    if isinstance(schema.get("additionalProperties"), bool):
        del schema["additionalProperties"]  # the models refuse unknown keys by name
    if schema.get("type") == "boolean" and schema.get("default") is False:
        del schema["default"]  # absent is false
    enum = schema.get("enum")
    if schema.get("type") == "string" and isinstance(enum, list) and all(isinstance(value, str) for value in enum):
        del schema["type"]  # the values say it: an enum of strings takes only strings
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            schema[key] = _compact_schema(schema[key])
    if isinstance(schema.get("properties"), dict):
        schema["properties"] = {name: _compact_schema(value) for name, value in schema["properties"].items()}
    if "anyOf" in schema:
        schema["anyOf"] = [_compact_schema(option) for option in schema["anyOf"]]
    return schema


def _inline_refs(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        target = definitions[schema["$ref"].rsplit("/", 1)[-1]]
        return _inline_refs({**target, **{k: v for k, v in schema.items() if k != "$ref"}}, definitions)
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if isinstance(value, dict):
            result[key] = _inline_refs(value, definitions)
        elif isinstance(value, list):
            result[key] = [_inline_refs(v, definitions) if isinstance(v, dict) else v for v in value]
        else:
            result[key] = value
    return result


def _merged(variants: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One property for every action that takes the argument: the first action's schema with the loosest
    bounds any action accepts, and its description — or, where the actions describe it differently, each
    description prefixed by its actions. A default the actions do not share is left to the descriptions."""
    prop = dict(variants[0][1])
    for key, loosest in (("minimum", min), ("maximum", max), ("minItems", min), ("maxItems", max)):
        bounds = [variant[key] for _, variant in variants if key in variant]
        if len(bounds) < len(variants):
            prop.pop(key, None)  # an action takes it unbounded
        elif bounds:
            prop[key] = loosest(bounds)
    texts: dict[str, list[str]] = {}
    for action, variant in variants:
        text = variant.get("description")
        if text:
            texts.setdefault(text, []).append(action)
    if len(texts) == 1:
        prop["description"] = next(iter(texts))
    elif texts:
        prop["description"] = "; ".join(f"{'/'.join(actions)}: {text}" for text, actions in texts.items())
    if len({repr(variant.get("default")) for _, variant in variants}) > 1:
        prop.pop("default", None)
    return prop


def _flat(prop: dict[str, Any]) -> dict[str, Any]:
    """A nested object (or a list of them) whose description spells out its keys is advertised as just an
    object: the description says it once, and the model still checks every key."""
    if "description" not in prop:
        return prop
    if "properties" in prop:
        return {key: value for key, value in prop.items() if key not in ("properties", "required")}
    items = prop.get("items")
    if isinstance(items, dict) and "properties" in items:
        return {**prop, "items": {"type": "object"}}
    return prop


def build_input_schema(spec: ToolSpec) -> dict[str, Any]:
    """One flat object: `action` enum plus the union of every action's arguments, described by the models."""
    variants: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for action in spec.actions:
        raw = action.model.model_json_schema()
        definitions = raw.get("$defs", {})
        for name, prop in raw.get("properties", {}).items():
            if name != "action":
                prop = _flat(_compact_schema(_inline_refs(prop, definitions)))
                variants.setdefault(name, []).append((action.name, prop))
    properties: dict[str, Any] = {}
    if spec.has_actions:
        properties["action"] = {"enum": [action.name for action in spec.actions]}
    properties.update({name: _merged(found) for name, found in variants.items()})
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if spec.has_actions:
        schema["required"] = ["action"]
    return schema
