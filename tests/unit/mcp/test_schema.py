"""The advertised tool definitions: built from the argument models, small, and every argument described."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import mcp_types
import pytest

from app.mcp.registry import ToolSpec
from app.mcp.schema import mcp_tool
from app.mcp.tools.catalog import ALL_SPECS
from tests.support.contract import CONTRACT_ACTIONS

# tools/list for all 11 tools, as the SDK sends it (compact JSON, UTF-8): 20,682 characters before the
# schemas came from the models, 15,985 after (2026-12-01; with the contract's output schema, hints at the
# protocol's defaults left out). Declaring `result` as a property of the output schema (issue 22: a client
# generating types from it saw no `result`) costs 42 characters a tool: 16,447; 16,475 by the regroup (BASELINE).
# An enum of strings without its implied `"type":"string"` (21 properties): 16,139. Issue 24's 14,000 is not reached
# with every argument, bound and description kept: the input schemas are exactly the meaning the next test compares,
# so 16,139 is the smallest lossless layout (descriptions 2,335, input structure 8,809 and texts 2,721, output
# schemas 891, annotations 427, tool keys and names 944: docs/BENCHMARKS.md, "tools/list size").
TOOLS_LIST_BUDGET = 16_150


# tools/list as main advertised it before the schemas were built from the services' request models (2026-12-01,
# 16,475 characters): every tool's name, description, input schema, output schema and hints. Regenerate it only for
# a deliberate change of the advertised surface, in the commit that makes it.
TESTS = next(folder for folder in Path(__file__).resolve().parents if folder.name == "tests")
BASELINE = TESTS / "support" / "tools_list.json"
# What a property says, as a client reads it; anything else (key order, a type its enum implies) is layout.
MEANING_KEYS = (
    "type",
    "enum",
    "default",
    "description",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
)


def _definitions() -> list[dict[str, Any]]:
    return [mcp_tool(spec).model_dump(by_alias=True, exclude_none=True) for spec in ALL_SPECS]


def _meaning(prop: dict[str, Any]) -> dict[str, Any]:
    """A property's type, bounds, enum, default and description, with the type an enum of strings implies."""
    unknown = set(prop) - {*MEANING_KEYS, "items", "properties", "required"}
    assert not unknown, f"a keyword this comparison does not read: {unknown}"
    meaning = {key: prop[key] for key in MEANING_KEYS if key in prop}
    if "type" not in meaning and "enum" in meaning and all(isinstance(value, str) for value in meaning["enum"]):
        meaning["type"] = "string"
    if isinstance(prop.get("items"), dict):
        meaning["items"] = _meaning(prop["items"])
    if isinstance(prop.get("properties"), dict):
        meaning["properties"] = {name: _meaning(value) for name, value in prop["properties"].items()}
        meaning["required"] = sorted(prop.get("required", []))
    return meaning


def _tool_meaning(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": tool.get("description"),
        "input": _meaning(tool["inputSchema"]),
        "output": tool.get("outputSchema"),
        "annotations": tool.get("annotations"),
    }


def test_tools_list_says_what_it_said_before_only_laid_out_smaller() -> None:
    """Same tools, arguments, types, bounds, enums, defaults and descriptions as the recorded tools/list."""
    before = {tool["name"]: _tool_meaning(tool) for tool in json.loads(BASELINE.read_text(encoding="utf-8"))}
    now = {tool["name"]: _tool_meaning(tool) for tool in _definitions()}
    assert list(now) == list(before)
    for name, meaning in now.items():
        assert set(meaning["input"]["properties"]) == set(before[name]["input"]["properties"]), name
        assert meaning == before[name], name


def test_tools_list_fits_the_budget() -> None:
    size = len(json.dumps(_definitions(), ensure_ascii=False, separators=(",", ":")))
    print(f"tools/list: {size} characters for {len(ALL_SPECS)} tools")
    assert size <= TOOLS_LIST_BUDGET, size


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda spec: spec.name)
def test_every_argument_is_described(spec: ToolSpec) -> None:
    properties = mcp_tool(spec).input_schema["properties"]
    undescribed = [name for name, prop in properties.items() if name != "action" and not prop.get("description")]
    assert not undescribed, undescribed


@pytest.mark.parametrize("spec", [spec for spec in ALL_SPECS if spec.has_actions], ids=lambda spec: spec.name)
def test_every_action_names_its_required_arguments(spec: ToolSpec) -> None:
    tool = mcp_tool(spec)
    properties = tool.input_schema["properties"]
    description = tool.description or ""
    for action in spec.actions:
        required = [
            name for name, field in action.model.model_fields.items() if field.is_required() and name != "action"
        ]
        assert set(required) <= set(properties), action.name
        assert re.search(rf"(?<!\w){action.name}(?!\w)", description), f"{spec.name}: {action.name} unnamed"
        braced = re.search(rf"(?<!\w){action.name} \{{([^}}]*)\}}", description)
        listed = set(re.split(r"[,|] ?", braced.group(1))) if braced else set()
        assert set(required) <= listed, f"{spec.name} {action.name}: {description}"


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda spec: spec.name)
def test_retired_arguments_are_named_with_their_replacement_not_advertised(spec: ToolSpec) -> None:
    tool = mcp_tool(spec)
    live = {name for action in spec.actions for name in action.model.model_fields}
    for name, text in spec.retired.items():
        assert name not in tool.input_schema["properties"]
        replacement = text.partition("; use ")[2].split(" (", 1)[0]
        assert (f"{name}→{replacement}" if replacement else f"{name} (no replacement)") in (tool.description or "")
    for action, retired in spec.retired_per_action.items():
        for name, text in retired.items():
            assert name in live or name not in tool.input_schema["properties"]
            assert f"{action} {name}→{text.partition('; use ')[2]}" in (tool.description or "")


SCHEMAS = {spec.name: mcp_tool(spec).input_schema for spec in ALL_SPECS}


def test_the_eleven_tools_in_contract_order() -> None:
    assert list(SCHEMAS) == list(CONTRACT_ACTIONS)


@pytest.mark.parametrize("tool", list(CONTRACT_ACTIONS))
def test_action_enum_lists_exactly_the_contract_actions(tool: str) -> None:
    schema = SCHEMAS[tool]
    actions = CONTRACT_ACTIONS[tool]
    if not actions:
        assert schema == {"type": "object", "properties": {}}
        return
    assert schema["properties"]["action"] == {"enum": actions}  # an enum of strings: its type goes without saying
    assert schema["required"] == ["action"]


def _schema_nodes(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    """Every JSON-schema node below `node` (property *names* are not schema keys)."""
    found = [(path, node)]
    for name, child in (node.get("properties") or {}).items():
        found += _schema_nodes(child, f"{path}.{name}")
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            found += _schema_nodes(node[key], f"{path}[{key}]")
    for key in ("anyOf", "oneOf", "allOf"):
        for index, child in enumerate(node.get(key) or []):
            found += _schema_nodes(child, f"{path}[{key}{index}]")
    return found


@pytest.mark.parametrize("tool", list(CONTRACT_ACTIONS))
def test_input_schema_is_flat_and_carries_no_titles(tool: str) -> None:
    schema = SCHEMAS[tool]
    assert schema["type"] == "object"
    assert set(schema) <= {"type", "properties", "required"}
    for path, node in _schema_nodes(schema, tool):
        assert "title" not in node, path
        assert not {"$ref", "$defs", "definitions"} & set(node), path
    assert all(isinstance(prop, dict) for prop in schema["properties"].values())


def test_a_property_named_title_survives() -> None:
    """`title` the argument (memory_crystallize cluster) is not `title` the schema annotation."""
    assert SCHEMAS["memory_crystallize"]["properties"]["title"]["type"] == "string"


def test_the_whole_tools_list_stays_small() -> None:
    tools = [mcp_tool(spec) for spec in ALL_SPECS]
    wire = mcp_types.ListToolsResult(tools=tools).model_dump_json(by_alias=True, exclude_none=True)
    assert len(json.loads(wire)["tools"]) == 11
    assert len(wire) < 24_000, len(wire)
