"""The console's graphs, as the JSON a page embeds for static/graph.js (Cytoscape.js) to draw: a thought's
neighbourhood (its one-hop edges and parent/develops chain, app.services.recall.operations.neighbourhood) and a
project's most connected thoughts (`overview`, drawn by the page at /ui/graph, app/http/ui/project_graph.py).

Colours live here and nowhere else in code: the page's text legend and the drawing both read them (the legend's
swatches through CSS classes, since the Content-Security-Policy allows no inline styles). Edge types also differ
by line style, so colour is never the only cue.
"""

from __future__ import annotations

import uuid
from typing import Any

from app.services.recall.operations import Neighbourhood
from app.services.recall.project_graph import ProjectGraph
from app.services.values import EdgeRecord, ThoughtRecord

# A node's label on the drawing: short enough to stay legible at 13 px beside its neighbours; the full text (up to
# TIP_CHARS) shows in the tip on hover and keyboard focus.
LABEL_CHARS = 32
TIP_CHARS = 280
# status → fill (each ≥ 3:1 against the white canvas); static/graph.css colours the legend's swatches alike
STATUS_COLOURS = {"active": "#1a7f37", "draft": "#b45309", "archived": "#6b7280"}
COLOUR_NAMES = {
    "#1a7f37": "green",
    "#b45309": "amber",
    "#6b7280": "grey",
    "#0b57d0": "blue",
    "#6d28d9": "violet",
    "#0f766e": "teal",
    "#a50e0e": "dark red",
    "#1d4ed8": "indigo",
    "#9a3412": "brown",
    "#be123c": "crimson",
    "#4a5260": "slate",
}
# edge type → (colour, line style)
EDGE_STYLES = {
    "related": ("#0b57d0", "solid"),
    "parent": ("#6d28d9", "solid"),
    "develops": ("#0f766e", "solid"),
    "replaces": ("#a50e0e", "dashed"),
    "cluster": ("#4a5260", "dotted"),
    "references": ("#1d4ed8", "dashed"),
    "depends_on": ("#9a3412", "solid"),
    "contradicts": ("#be123c", "dashed"),
    "supports": ("#1a7f37", "dotted"),
}
OTHER = ("#4a5260", "solid")


def neighbourhood(found: Neighbourhood) -> dict[str, Any]:
    """The centre, its direct neighbours (both ways) and its parent/develops lineage; every edge once, and only
    edges whose both ends are drawn."""
    centre = found.thought
    nodes: dict[str, dict[str, Any]] = {str(centre.id): _record_node(centre, centre=True)}
    edges: dict[str, EdgeRecord] = {}
    steps = [*found.upstream, *found.downstream, *(step.neighbour for step in [*found.ancestors, *found.descendants])]
    for step in steps:
        nodes.setdefault(str(step.thought.id), _record_node(step.thought, centre=False))
        edges.setdefault(str(step.edge.id), step.edge)
    drawn = [
        _edge(edge.id, edge.source_id, edge.target_id, edge.type.value)
        for edge in edges.values()
        if str(edge.source_id) in nodes and str(edge.target_id) in nodes
    ]
    return {"centre": str(centre.id), "nodes": list(nodes.values()), "edges": drawn}


def legend(graph: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """The statuses and edge types the graph shows, for the text legend: (name, how it is drawn, in words)."""
    statuses = sorted({node["status"] for node in graph["nodes"]})
    types = sorted({edge["type"] for edge in graph["edges"]})
    return {
        "statuses": [(status, COLOUR_NAMES[STATUS_COLOURS.get(status, OTHER[0])]) for status in statuses],
        "edges": [(edge_type, _drawn(EDGE_STYLES.get(edge_type, OTHER))) for edge_type in types],
    }


def _drawn(style: tuple[str, str]) -> str:
    return f"{style[1]} {COLOUR_NAMES[style[0]]} line"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _node(thought: dict[str, Any], centre: bool, degree: int | None = None) -> dict[str, Any]:
    words = " ".join(str(thought.get("content") or "").split())
    status = str(thought.get("status") or "active")
    node = {
        "id": str(thought["id"]),
        "label": _cut(words, LABEL_CHARS),
        "full": _cut(words, TIP_CHARS),
        "status": status,
        "colour": STATUS_COLOURS.get(status, OTHER[0]),
        "centre": centre,
    }
    if degree is not None:
        node["degree"] = degree
    return node


def _record_node(thought: ThoughtRecord, centre: bool) -> dict[str, Any]:
    return _node({"id": thought.id, "content": thought.content, "status": thought.status.value}, centre)


def _edge(edge_id: uuid.UUID, source: uuid.UUID, target: uuid.UUID, edge_type: str) -> dict[str, Any]:
    colour, line = EDGE_STYLES.get(edge_type, OTHER)
    return {
        "id": str(edge_id),
        "source": str(source),
        "target": str(target),
        "type": edge_type,
        "colour": colour,
        "line": line,
    }


def overview(found: ProjectGraph) -> dict[str, Any]:
    """A page of a project's most connected thoughts as the drawing's JSON (no centre: the most connected sit
    innermost)."""
    nodes = [
        _node({"id": node.id, "content": node.content, "status": node.status}, False, node.degree)
        for node in found.nodes
    ]
    edges = [_edge(edge.id, edge.source_id, edge.target_id, edge.type) for edge in found.edges]
    return {"centre": None, "nodes": nodes, "edges": edges}
