"""Hypothesis strategies for hostile tool arguments.

Every call is built from the tool's own action models (so a new argument is fuzzed without touching
this file): each argument is either a plausible value for its name, an adversarial one of the right
type (huge, unicode, SQL / tsquery metacharacters, out of range, malformed ids), junk of any type, or
left out; unknown keys, retired names and the arguments of other actions are mixed in, and the action
itself is sometimes another action's name, a retired or unknown one, or not a string at all.

Ids of the seeded database are not known while strategies are built, so id arguments draw a `Ref`
(kind, index, spelling) that the test resolves against its seeded world just before the call.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from hypothesis import strategies as st
from pydantic.fields import FieldInfo

from app.mcp.registry import Action, ToolSpec
from app.mcp.tools.catalog import ALL_SPECS

SPECS = {spec.name: spec for spec in ALL_SPECS}
TOOL_NAMES = [spec.name for spec in ALL_SPECS]
ALL_ACTION_NAMES = sorted({action.name for spec in ALL_SPECS for action in spec.actions if action.name})
RETIRED_NAMES = sorted(
    {name for spec in ALL_SPECS for name in spec.retired}
    | {name for spec in ALL_SPECS for names in spec.retired_per_action.values() for name in names}
)
ALL_ARGUMENT_NAMES = sorted(
    {name for spec in ALL_SPECS for action in spec.actions for name in action.model.model_fields} - {"action"}
)

# Text that must never reach a client: driver, ORM and stack-trace wording.
DRIVER_MARKERS = (
    "asyncpg",
    "sqlalchemy",
    "sqlalche.me",
    "Traceback",
    "psycopg",
    "syntax error at or near",
    "DBAPIError",
    "ProgrammingError",
    "(Background on this error",
    'File "/',
)


# ---------------------------------------------------------------- ids resolved against the seeded world

ID_FORMS = ("full", "full", "full", "upper", "nohyphen", "padded", "braces", "urn", "prefix13", "prefix8", "prefix20")


@dataclass(frozen=True)
class Ref:
    """An id of the seeded world: `kind` (thought, edge, project, ...), which one, and how it is spelled."""

    kind: str
    index: int
    form: str = "full"

    def spell(self, value: str) -> str:
        compact = value.replace("-", "")
        return {
            "full": value,
            "upper": value.upper(),
            "nohyphen": compact,
            "padded": f"  {value}\t",
            "braces": "{" + value + "}",
            "urn": f"urn:uuid:{value}",
            "prefix13": compact[:13],
            "prefix8": compact[:8],
            "prefix20": value[:20],
        }[self.form]


def resolve(value: Any, world: dict[str, list[str]]) -> Any:
    """Replace every `Ref` in a drawn argument structure by a real id of the world (or a stranger)."""
    if isinstance(value, Ref):
        pool = world.get(value.kind) or []
        real = pool[value.index % len(pool)] if pool else str(uuid.UUID(int=value.index + 1))
        return value.spell(real)
    if isinstance(value, dict):
        return {key: resolve(item, world) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, world) for item in value]
    return value


ID_KIND = {
    "thought_id": "thought",
    "source_id": "thought",
    "target_id": "thought",
    "parent_id": "thought",
    "source": "thought",
    "target": "thought",
    "edge_id": "edge",
    "primer_id": "primer",
    "proposal_id": "proposal",
    "run_id": "run",
    "project_id": "project",
    "preview_token": "token",
}
ID_LIST_KIND = {
    "thought_ids": "thought",
    "source_ids": "thought",
    "edge_ids": "edge",
    "proposal_ids": "proposal",
}

MALFORMED_IDS = [
    "",
    " ",
    "0",
    "null",
    "not-a-uuid",
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "01a172b4-d486-700c-a16e-5ae3d2d77a9",
    "01a172b4-d486-700c-a16e-5ae3d2d77a900",
    "01a172b4-d486-700c-a16e-5ae3d2d77a9g",
    "01a172b4-d486-700c-a16e-5ae3d2d77a9\u0660",
    "0１a172b4-d486-700c-a16e-5ae3d2d77a90",  # a full-width digit
    "--------------------------------",
    "-0-1-a-1-7-2-b-4-d-4-8-6-7-0-0-c-a-1-6-e-5-a-e-3-d-2-d-7-7-a-9-0-",
    "0" * 64,
    "0" * 65,
    "'; DROP TABLE thought;--",
    "' OR '1'='1",
    "*",
    "%",
    "_",
    "01a172b4d4867",
    "01a172b4-d486-7",
    "$1",
    "\u202e09a7d77d2e3ea5e61a-c007-684d-4b271a10",
]


def _id_spellings() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(MALFORMED_IDS),
        st.uuids().map(str),
        st.uuids().map(lambda value: value.hex.upper()),
        st.text("0123456789abcdefABCDEF-", min_size=1, max_size=70),
    )


def id_like(kind: str) -> st.SearchStrategy[Any]:
    refs = st.builds(Ref, st.just(kind), st.integers(0, 7), st.sampled_from(ID_FORMS))
    other_kind = st.builds(
        Ref, st.sampled_from(["thought", "edge", "project", "proposal", "primer", "run", "token"]), st.integers(0, 7)
    )
    return st.one_of(refs, refs, other_kind, _id_spellings(), text_like(short=True), junk())


# ---------------------------------------------------------------- text

SQL_AND_TSQUERY = [
    "'; DROP TABLE thought;--",
    "'); DELETE FROM project; --",
    "&|!():*<->",
    "a & b | !c",
    "foo:*",
    "!(alpha <-> beta)",
    "alpha <2> beta",
    "' OR '1'='1",
    "\\",
    "\\\\",
    "%",
    "_%_",
    "$1",
    "$$ $tag$",
    "::text",
    "/**/",
    "--",
    ";",
    "''",
    '"',
    "\\x00",
    "E'\\x00'",
    "%s%s%n",
    "{0}",
    "${jndi:ldap://x}",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "NULL",
    "null",
    "ALL",
    "*",
    "?",
    "[",
    "(",
    ")",
    "!",
    ":",
    "<->",
    "~*",
    "@@",
    "setweight(to_tsvector('x'),'A')",
]
UNICODE_SPECIALS = [
    "\x00",
    "a\x00b",
    "\x01\x02\x1b[31m",
    "\u202eRTL override\u202c",
    "שלום עולם",
    "مرحبا بالعالم",
    "\u200b\u200c\u200d",
    "\ufeff",
    "𝕏𝔽𝕌ℤℤ 😀🧠🏳️‍🌈",
    "e\u0301\u0301\u0301",
    "\U0010fffd",
    "\uffff",
    "\r\n",
    "\t",
    " ",
    "",
    "İıſK",
    "日本語のテキスト",
    "\u2028\u2029",
]
HUGE_CHUNKS = ["x", "é", "😀", "a b ", "'; DROP TABLE thought;--", "&|!", "日本"]


def _huge(chunk: str, extra: int) -> str:
    """A string beyond 100 000 characters (the largest `max_length` of any argument)."""
    return chunk * (100_001 // len(chunk) + 1 + extra)


def noise(seed: int, length: int) -> str:
    """Incompressible text (mostly multi-byte, astral included): what a btree index row cannot hold."""
    rng = random.Random(seed)
    chars = []
    for _ in range(length):
        code = rng.choice((rng.randint(0x4E00, 0x9FFF), rng.randint(0x1F300, 0x1FAFF), rng.randint(0x21, 0x7E)))
        chars.append(chr(code))
    return "".join(chars)


def text_like(short: bool = False) -> st.SearchStrategy[str]:
    plain = st.text(max_size=12 if short else 60)
    unicode_text = st.text(st.characters(codec="utf-8"), max_size=12 if short else 60)
    specials = st.sampled_from(SQL_AND_TSQUERY + UNICODE_SPECIALS)
    mixed = st.builds(lambda a, m, b: f"{a}{m}{b}", plain, specials, unicode_text)
    options = [plain, unicode_text, specials, mixed]
    if not short:
        options.append(st.builds(_huge, st.sampled_from(HUGE_CHUNKS), st.integers(0, 3)))
        options.append(st.builds(noise, st.integers(0, 2**32), st.integers(600, 5000)))
        options.append(st.integers(1, 200).map(lambda n: "word " * n))
    return st.one_of(*options)


def path_like() -> st.SearchStrategy[str]:
    samples = [
        "/srv/fuzz",
        "/srv/fuzz/src",
        "/srv/fuzz//deep///x/",
        "/srv/fuzz/../..",
        "/",
        "//",
        "",
        " ",
        ".",
        "..",
        "relative/path",
        "~/x",
        "C:\\work\\x",
        "\\\\server\\share",
        "file:///srv/fuzz",
        "/tmp/\u202eevil",
        "/" + "a" * 4095,
        "/" + "a" * 4097,
    ]
    built = st.lists(text_like(short=True), min_size=1, max_size=6).map(lambda parts: "/" + "/".join(parts))
    noisy = st.builds(lambda seed, n: "/" + noise(seed, n), st.integers(0, 2**32), st.integers(700, 4095))
    return st.one_of(st.sampled_from(samples), built, noisy, text_like())


# ---------------------------------------------------------------- numbers, booleans, enums, junk

INTS = [0, -1, 1, 2, 3, 5, 49, 50, 51, 99, 100, 101, 365, 366, 499, 500, 501, 999, 1000, 1001, 10_000, 10_001]
BIG_INTS = [2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, -(2**31), 10**30, -(10**30), 10**400]
NUMERIC_STRINGS = [
    "NaN",
    "nan",
    "-nan",
    "Infinity",
    "-Infinity",
    "inf",
    "1e309",
    "-1e309",
    "1e308",
    "5",
    " 7 ",
    "0x10",
    "1_000",
    "1.5",
    "-0",
    "٣",
    "",
    "1e2",
    "99999999999999999999999",
]
FLOATS = [0.0, -0.0, 0.5, 1.0, 1.0000001, 2.0, -1.0, 5e-324, 1e-300, 1e10, 1e15, 1e300, 1e308, -1e308]


def int_like() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(-5, 600),
        st.sampled_from(INTS),
        st.sampled_from(BIG_INTS),
        st.integers(),
        st.sampled_from(NUMERIC_STRINGS),
        st.sampled_from([float("inf"), float("-inf"), float("nan"), 1.5, 2.0, True, False]),
    )


def float_like() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.floats(0, 1),
        st.sampled_from(FLOATS),
        st.sampled_from([float("inf"), float("-inf"), float("nan")]),
        st.floats(),
        st.sampled_from(NUMERIC_STRINGS),
        st.sampled_from(INTS + BIG_INTS),
    )


def bool_like() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.booleans(),
        st.sampled_from(["true", "false", "yes", "no", "1", "0", "on", "off", "TRUE", "maybe", "", 2, -1, 0, 1, 0.5]),
    )


ENUMS: dict[str, list[str]] = {
    "status": ["draft", "active", "archived", "all", "pending", "accepted", "rejected", "expired", "stale"],
    "edge_type": ["related", "supports", "contradicts", "parent", "develops", "supersedes", "depends_on"],
    "new_type": ["related", "supports", "contradicts", "parent", "develops", "supersedes"],
    "type": ["related", "supports", "contradicts", "parent", "develops"],
    "supersession_mode": ["flag", "suppress", "off"],
    "contradiction_mode": ["flag", "off"],
    "severity": ["critical", "warning", "info"],
    "kind": ["edge", "placement", "lifecycle", "triage_activate", "triage_archive"],
    "tags_mode": ["replace", "add", "remove"],
}
ENUM_JUNK = ["", "ACTIVE", " active", "active\x00", "deleted", "*", "'; DROP TABLE thought;--", "rolled_back", "all "]


def enum_like(name: str) -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(ENUMS[name]), st.sampled_from(ENUM_JUNK), text_like(short=True), junk())


def junk() -> st.SearchStrategy[Any]:
    """Any JSON-ish value, nested: wrong types for whatever argument it lands in."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.sampled_from(BIG_INTS),
        st.floats(),
        st.text(max_size=20),
        st.sampled_from(SQL_AND_TSQUERY + UNICODE_SPECIALS + NUMERIC_STRINGS),
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=10,
    )


def datetime_like() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(
            [
                "2030-01-01T00:00:00Z",
                "2020-01-01",
                "2030-01-01T00:00:00+14:00",
                "9999-12-31T23:59:59",
                "9999-12-31T23:59:59-12:00",
                "0001-01-01T00:00:00",
                "0001-01-01T00:00:00+14:00",
                "10000-01-01T00:00:00",
                "2030-13-45T99:99:99",
                "yesterday",
                "now",
                "",
                "1e309",
            ]
        ),
        st.datetimes().map(lambda moment: moment.isoformat()),
        st.sampled_from([0, -1, 2**40, 2**63, 1e20, float("nan")]),
    )


def url_like() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(
            [
                "https://example.com/a",
                "http://x",
                "HTTP://EXAMPLE.COM",
                "javascript:alert(1)",
                "ftp://example.com",
                "https://exa mple.com",
                "https://",
                "http://\x00",
                "https://example.com/" + "a" * 2100,
                "data:text/html,<script>",
            ]
        ),
        text_like(short=True).map(lambda tail: "https://example.com/" + tail),
        junk(),
    )


def _with_junk_keys(base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    extra = st.dictionaries(st.sampled_from(["colour", "\x00", "", "project_id", "action"]), junk(), max_size=2)
    return st.one_of(base, st.builds(lambda a, b: {**a, **b}, base, extra), junk())


def thought_row() -> st.SearchStrategy[Any]:
    return _with_junk_keys(
        st.fixed_dictionaries(
            {"content": text_like()},
            optional={
                "tags": st.lists(text_like(short=True), max_size=4),
                "status": enum_like("status"),
                "is_protected": bool_like(),
                "is_global": bool_like(),
                "parent_id": id_like("thought"),
                "url_links": st.lists(st.fixed_dictionaries({"text": text_like(short=True), "url": url_like()})),
            },
        )
    )


def link_row() -> st.SearchStrategy[Any]:
    return _with_junk_keys(
        st.fixed_dictionaries(
            {"source": id_like("thought"), "target": id_like("thought")}, optional={"type": enum_like("type")}
        )
    )


def compact_summary() -> st.SearchStrategy[Any]:
    return _with_junk_keys(
        st.fixed_dictionaries(
            {"content": text_like()},
            optional={"tags": st.lists(text_like(short=True), max_size=4), "project_id": id_like("project")},
        )
    )


def string_list(short: bool = True, max_size: int = 6) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(text_like(short=short), max_size=max_size),
        st.lists(text_like(short=True), min_size=40, max_size=120),
        junk(),
    )


# ---------------------------------------------------------------- one argument, by name


def plausible(name: str) -> st.SearchStrategy[Any]:
    """A value that could be right for an argument of this name (adversarial within its type)."""
    if name in ID_KIND:
        return id_like(ID_KIND[name])
    if name in ID_LIST_KIND:
        ids = id_like(ID_LIST_KIND[name])
        return st.one_of(st.lists(ids, max_size=6), st.lists(ids, min_size=990, max_size=1002), junk())
    if name in ENUMS:
        return enum_like(name)
    if name in ("cwd", "local_path"):
        return path_like()
    if name in ("query", "content", "merged_content", "title", "name", "description", "tag"):
        return text_like(short=name == "tag")
    if name == "summary":  # reflect: text; retention compact: an object
        return st.one_of(text_like(), compact_summary())
    if name in ("tags", "merged_tags", "fields"):
        return string_list()
    if name in ("goals_add", "goals_remove", "decisions", "pending"):
        return string_list(short=False, max_size=3)
    if name in ("thoughts",):
        return st.one_of(st.lists(thought_row(), min_size=1, max_size=6), st.just([]), junk())
    if name == "links":
        return st.one_of(st.lists(link_row(), min_size=1, max_size=6), st.just([]), junk())
    if name == "url_links":
        return st.one_of(
            st.lists(st.fixed_dictionaries({"text": text_like(short=True), "url": url_like()}), max_size=3), junk()
        )
    if name == "surface_after":
        return datetime_like()
    if name in (
        "limit",
        "offset",
        "max_degree",
        "slots_limit",
        "max_edges",
        "max_proposals",
        "min_members",
        "wake_days",
    ):
        return int_like()
    if name in (
        "min_relevance",
        "min_importance",
        "recency_weight",
        "recency_half_life_days",
        "importance_floor",
        "min_age_days",
        "min_similarity",
    ):
        return float_like()
    if name in (
        "hybrid",
        "compact",
        "include_url_links",
        "include_edges",
        "confirm",
        "group_by_cluster",
        "is_cluster",
        "include_details",
        "include_signals",
        "include_retired",
        "is_protected",
        "is_global",
        "protected",
    ):
        return bool_like()
    return junk()


# ---------------------------------------------------------------- valid values (derived from the models)

WORDS = ["postgres", "billing", "card payments", "retries", "memory", "token", "embedding", "cluster", "draft"]
SAFE_SPECIALS = [text for text in SQL_AND_TSQUERY + UNICODE_SPECIALS if "\x00" not in text]
SAFE_TEXT = st.builds(
    lambda word, tail: f"{word} {tail}",
    st.sampled_from(WORDS),
    st.one_of(
        st.sampled_from(SAFE_SPECIALS),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40),
        st.sampled_from(WORDS),
    ),
)
KNOWN_PATHS = ["/srv/fuzz", "/srv/fuzz/src/deep", "/srv/other", "/srv/unknown", "/srv/fuzz/../other", "/"]


def _bounds(metadata: list[Any]) -> tuple[float | None, float | None, bool, bool]:
    low = high = None
    low_open = high_open = False
    for item in metadata:
        for attribute, is_low, is_open in (
            ("ge", True, False),
            ("gt", True, True),
            ("le", False, False),
            ("lt", False, True),
        ):
            value = getattr(item, attribute, None)
            if value is None:
                continue
            if is_low:
                low, low_open = value, is_open
            else:
                high, high_open = value, is_open
    return low, high, low_open, high_open


def _list_bounds(metadata: list[Any]) -> tuple[int, int]:
    low = next((item.min_length for item in metadata if hasattr(item, "min_length") and item.min_length), 0)
    return int(low or 0), 5


def _unwrap(annotation: Any) -> Any:
    """Optional[X] → X; Annotated[X, ...] → X."""
    if get_origin(annotation) in (Union, UnionType):
        options = [option for option in get_args(annotation) if option is not type(None)]
        annotation = options[0] if len(options) == 1 else annotation
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def valid_value(name: str, info: FieldInfo) -> st.SearchStrategy[Any]:
    """A value the action model accepts (hostile where the type allows it: SQL text, unicode, huge numbers)."""
    if name in ID_KIND:
        return st.builds(Ref, st.just(ID_KIND[name]), st.integers(0, 7), st.sampled_from(["full", "upper", "nohyphen"]))
    if name in ID_LIST_KIND:
        ref = st.builds(Ref, st.just(ID_LIST_KIND[name]), st.integers(0, 7))
        return st.lists(ref, min_size=1, max_size=4)
    if name == "cwd":
        return st.sampled_from(KNOWN_PATHS)
    if name == "local_path":
        return SAFE_TEXT.map(lambda tail: "/srv/fz/" + tail.replace("/", "_"))
    if name == "thoughts":
        row = st.fixed_dictionaries(
            {"content": SAFE_TEXT},
            optional={
                "tags": st.lists(st.sampled_from(WORDS), max_size=3),
                "status": st.sampled_from(["draft", "active"]),
            },
        )
        return st.lists(row, min_size=1, max_size=4)
    if name == "links":
        ref = st.builds(Ref, st.just("thought"), st.integers(0, 7))
        item = st.fixed_dictionaries({"source": ref, "target": ref}, optional={"type": st.sampled_from(ENUMS["type"])})
        return st.lists(item, min_size=1, max_size=4)
    if name == "url_links":
        link = st.fixed_dictionaries({"text": SAFE_TEXT, "url": st.sampled_from(["https://example.com/a", "http://x"])})
        return st.lists(link, max_size=2)
    if name == "summary" and _unwrap(info.annotation) is not str:
        return st.fixed_dictionaries({"content": SAFE_TEXT}, optional={"tags": st.lists(st.sampled_from(WORDS))})
    if name == "surface_after":  # the range of a time argument (app.formats): 1970 to 9999, UTC
        moments = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC))
        return moments.map(lambda moment: moment.isoformat())
    if name == "fields":
        return st.lists(st.sampled_from(["id", "content", "tags", "status", "project", "name", "importance"]))
    annotation = _unwrap(info.annotation)
    if get_origin(annotation) is Literal:
        return st.sampled_from(get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return st.sampled_from([member.value for member in annotation])
    if annotation is bool:
        return st.booleans()
    low, high, low_open, high_open = _bounds(info.metadata)
    if annotation is int:
        start = int(low or 0) + (1 if low_open else 0)
        if high is None:  # unbounded above: the model lets a huge number through to the handler
            return st.one_of(st.integers(start, start + 60), st.sampled_from([2**31, 2**63 - 1, 2**63, 10**30]))
        return st.integers(start, int(high) - (1 if high_open else 0))
    if annotation is float:
        floats = st.floats(min_value=low, max_value=high, exclude_min=low_open, exclude_max=high_open, allow_nan=False)
        if high is None:
            return st.one_of(floats, st.sampled_from([1e10, 1e300, float("inf")]))
        return floats
    if annotation is str:
        return SAFE_TEXT
    if get_origin(annotation) is list:
        low_size, high_size = _list_bounds(info.metadata)
        return st.lists(SAFE_TEXT, min_size=low_size, max_size=high_size)
    return st.none()


def valid_call(action: Action) -> st.SearchStrategy[dict[str, Any]]:
    """Required arguments always, each optional one half the time, every value accepted by the model."""
    required = {
        name: valid_value(name, info)
        for name, info in action.model.model_fields.items()
        if name != "action" and info.is_required()
    }
    optional = {
        name: valid_value(name, info)
        for name, info in action.model.model_fields.items()
        if name not in ("action", "confirm", "preview_token") and not info.is_required()
    }
    base = st.fixed_dictionaries({"action": st.just(action.name), **required}, optional=optional)
    if "preview_token" in action.model.model_fields:  # confirms with a live token of some other call
        token = st.builds(Ref, st.just("token"), st.integers(0, 7))
        flow = st.fixed_dictionaries({"confirm": st.just(True)}, optional={"preview_token": token})
        return st.one_of(base, st.builds(lambda a, b: {**a, **b}, base, flow))
    return base


# ---------------------------------------------------------------- a whole call


def _action_value(spec: ToolSpec, action: Action) -> st.SearchStrategy[Any]:
    others = [other.name for other in spec.actions if other.name != action.name] or ["search"]
    return st.one_of(
        st.just(action.name),
        st.just(action.name),
        st.just(action.name),
        st.sampled_from(others),  # valid-looking arguments for the wrong action
        st.sampled_from(ALL_ACTION_NAMES),  # another tool's action
        st.sampled_from(["", " ", "SEARCH", "list ", "list\x00", "top_k", "dry_run", "explode", "delete;--"]),
        junk(),
    )


def _extra_keys(spec: ToolSpec, action: Action) -> st.SearchStrategy[dict[str, Any]]:
    retired = sorted({*spec.retired, *spec.retired_per_action.get(action.name, {})}) or RETIRED_NAMES
    own = set(action.model.model_fields)
    foreign = [name for name in ALL_ARGUMENT_NAMES if name not in own] or ["colour"]
    keys = st.one_of(
        st.sampled_from(retired),
        st.sampled_from(RETIRED_NAMES),
        st.sampled_from(foreign),
        st.sampled_from(["colour", "__proto__", "constructor", "Action", "action ", "\x00", "", "ACTION", "$where"]),
        st.text(max_size=10),
    )
    return st.dictionaries(keys, st.one_of(junk(), st.sampled_from(foreign).flatmap(plausible)), max_size=3)


@st.composite
def hostile_call(draw: st.DrawFn, spec: ToolSpec, action: Action) -> dict[str, Any]:
    """Every argument plausible, adversarial, junk or left out; extra keys; a wrong or missing action."""
    arguments: dict[str, Any] = {}
    for name, info in action.model.model_fields.items():
        if name == "action":
            continue
        choice = draw(st.integers(0, 9))
        if choice >= 8 or (choice >= 6 and not info.is_required()):
            continue  # left out (a required one sometimes too)
        arguments[name] = draw(junk() if choice == 7 else plausible(name))
    arguments = {"action": draw(_action_value(spec, action)), **arguments}
    if draw(st.integers(0, 3)) == 0:
        arguments.update(draw(_extra_keys(spec, action)))
    if draw(st.integers(0, 19)) == 0:
        arguments.pop("action", None)
    return arguments


@st.composite
def near_valid_call(draw: st.DrawFn, spec: ToolSpec, action: Action) -> dict[str, Any]:
    """A call the model accepts, then none, one or two hostile changes (one argument, an extra key, the action)."""
    arguments = draw(valid_call(action))
    for _ in range(draw(st.integers(0, 2))):
        change = draw(st.sampled_from(["argument", "argument", "extra", "action", "drop"]))
        names = [name for name in action.model.model_fields if name != "action"]
        if change == "argument" and names:
            name = draw(st.sampled_from(names))
            arguments[name] = draw(st.one_of(plausible(name), junk()))
        elif change == "extra":
            arguments.update(draw(_extra_keys(spec, action)))
        elif change == "action":
            arguments["action"] = draw(_action_value(spec, action))
        elif change == "drop" and len(arguments) > 1:
            arguments.pop(draw(st.sampled_from(sorted(arguments))))
    return arguments


@st.composite
def tool_call(draw: st.DrawFn, spec: ToolSpec) -> dict[str, Any]:
    """Arguments for one call of `spec` (ids still as `Ref`s): near-valid half the time, hostile otherwise."""
    if not spec.has_actions:  # memory_guide: no arguments at all
        return draw(st.one_of(st.just({}), _extra_keys(spec, spec.actions[0])))
    action = draw(st.sampled_from(spec.actions))
    return draw(st.one_of(near_valid_call(spec, action), hostile_call(spec, action)))
