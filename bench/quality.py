"""Answer quality of `memory_recall action=search` on the scale data set (the `quality` section of bench.search).

    python -m bench.search --thoughts 10000 --sections quality      # this section alone
    python -m bench.search --thoughts 1000 --sections quality

The latency sections say how fast a search is at 10 k and 100 k thoughts; this section says whether it
finds what was asked for at the same scale, on the same store.

**Questions.** Every thought of `bench.dataset` is one of 32 templated facts over its project's
vocabulary. `parse` recovers the template and its slots from the stored text (the generator is not
touched, so the data the latency sections measure stays as it is), and each template has question
forms in other words: names of components, stores, things, tools and people and the numbers stay
(they repeat over hundreds of notes: the hard case), while the predicate, reasons, failures, causes,
triggers, rules, artifacts and actions are rephrased with synonyms from hand-written tables. A
question leaves out what it asks for (the number, the command, the cause, …) when the rest still
points at one note of the whole store; otherwise it names every slot (identifiers such as ADR, PR and
ticket numbers never). A target whose question would fit another active note as well (the other
note holds every slot the question names) is skipped and counted. Targets are drawn with a seeded
RNG from all active thoughts of the store (every project and position), so projects appear in the
data set's skew.

**Modes**, each called in-process through `app.mcp.dispatch.dispatch` (the path of the breakdown and
full-page sections), limit 10, scoped by cwd to the target's project, then without cwd for the first
`unscoped` questions:
- `hybrid` default arguments (the default relevance gate);
- `hybrid_gate0` with `min_relevance: 0`;
- `vector` with `hybrid: false`;
- `lexical`: the same call on an `AppContext` whose `EmbeddingRuntime` has no embedder, so the service
  answers from its lexical leg (meta.degraded, checked).

**References**, over the same scope (active thoughts of the project, or all), in the same run:
- `ref_bm25s`: BM25 by the `bm25s` package (k1 1.5, b 0.75, its English stop words, the PyStemmer
  English stemmer), only documents that match a query term;
- `ref_cosine`: exact cosine over the stored embeddings (read from the database; numpy) against the
  query embedding of the same offline model;
- `ref_rrf`: RRF (k = 60, ranks from 1) of the first 100 of those two, the pool the service fuses.

hit@k: the target is among the first k rows (k = 1, 5, 10); MRR over the first 10.
"""

from __future__ import annotations

import random
import re
import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import bm25s
import numpy as np
import Stemmer
from sqlalchemy import text

from app.config import EmbeddingSettings
from app.db.engine import Database
from app.embedding.embedder import Vector
from app.embedding.profiles import OFFLINE_MINILM
from app.embedding.runtime import EmbeddingRuntime
from app.services.context import AppContext
from app.services.recall.search import RRF_K, pool_size
from bench.dataset import (
    ARTIFACTS,
    CAUSES,
    FAILURES,
    PEOPLE,
    PROJECTS,
    REASONS,
    RULES,
    TODO_ACTIONS,
    TRIGGERS,
    ProjectVocab,
    admin_principal,
    model_cache_dir,
    settings_for,
    tool_caller,
)

LIMIT = 10
SEED = 20261215
MODES = ("hybrid", "hybrid_gate0", "vector", "lexical")
REFERENCES = ("ref_bm25s", "ref_cosine", "ref_rrf")
BM25_K1, BM25_B = 1.5, 0.75

# ---------------------------------------------------------------- paraphrase tables
# Two rewordings per phrase of the generator's shared lists, chosen per question by the seeded RNG. They avoid
# the phrase's own content words (after stemming) as far as English allows: the question must be found by its
# meaning and by the names it shares, not by the wording of the note.

# fmt: off
REASON_WORDS: dict[str, tuple[str, str]] = {
    "to cut p99 latency": ("so the slowest responses get faster", "to shave the tail response time"),
    "because the upstream rate-limits us": ("since the provider throttles our calls",
                                            "as the vendor caps how often we may call"),
    "per the security review": ("as the infosec audit demanded", "following what the safety assessment required"),
    "to stay under the free tier": ("to avoid paying for the hosted plan", "to remain within the no-cost quota"),
    "as agreed with the data team": ("following the analytics group's request",
                                     "after the analytics folks signed off"),
    "for GDPR deletion requests": ("so EU privacy erasure demands can be honoured",
                                   "to honour right-to-be-forgotten asks"),
    "since the last outage": ("after the previous downtime", "because of the most recent production breakdown"),
    "to keep deploys reversible": ("so a release can be rolled back", "to allow undoing a rollout"),
    "because tests were flaky": ("given the unreliable CI suite", "since checks kept failing at random"),
    "to save memory": ("to lower RAM usage", "to reduce the RAM footprint"),
    "until the vendor fixes their API": ("while the supplier's interface stays broken",
                                         "until the third party repairs its endpoints"),
    "to unblock the mobile release": ("so the phone app can ship", "so the smartphone launch is no longer held up"),
}
FAILURE_WORDS: dict[str, tuple[str, str]] = {  # past-tense verb phrases: "{component} {failure}"
    "timed out": ("hit its deadline", "hung past the deadline"),
    "ran out of memory": ("exhausted its RAM", "got OOM-killed"),
    "returned 502s": ("answered with bad-gateway errors", "sent back gateway errors"),
    "deadlocked": ("got stuck waiting on locks", "froze in a lock cycle"),
    "lost writes": ("dropped updates", "silently discarded saved data"),
    "double-charged users": ("billed customers twice", "took payment twice from people"),
    "stalled": ("stopped making progress", "froze without progress"),
    "leaked connections": ("kept sockets open without releasing them", "exhausted the pool by never closing sockets"),
    "crash-looped": ("kept restarting", "restarted again and again"),
    "served stale data": ("showed outdated results", "handed out old information"),
}
CAUSE_WORDS: dict[str, tuple[str, str]] = {
    "a missing index": ("a lookup without a supporting btree", "a full table scan on an unindexed column"),
    "an expired certificate": ("a TLS cert past its validity date", "an out-of-date TLS credential"),
    "a retry storm": ("clients hammering with repeated attempts", "a flood of re-attempted calls"),
    "a race between two workers": ("two consumers competing for the same row", "concurrent processes clashing"),
    "a connection pool of 5": ("only five pooled DB sockets", "a pool limited to five sessions"),
    "an unbounded query": ("a SELECT with no row cap", "a statement fetching every row at once"),
    "clock skew": ("servers disagreeing about the time", "time drift between hosts"),
    "a bad config push": ("a faulty settings rollout", "a broken configuration deploy"),
    "a full disk": ("no free storage space left", "a volume at 100 % capacity"),
    "a schema change without a default": ("a new column lacking a fallback value",
                                          "an ALTER TABLE with no initial value"),
    "DNS caching": ("stale name-resolution entries", "hostnames resolved from an old lookup"),
    "a leaked file descriptor": ("a handle that was never closed", "an unreleased fd"),
}
TRIGGER_WORDS: dict[str, tuple[str, str]] = {
    "a deploy": ("a release rollout", "shipping a new build"),
    "a traffic spike": ("a surge in requests", "a sudden burst of visitors"),
    "the nightly batch": ("the overnight processing run", "the 2 a.m. bulk job"),
    "a failover": ("a switch to the standby", "the primary handing over to its standby"),
    "a dependency upgrade": ("bumping a library version", "a package version bump"),
    "a cron overlap": ("two scheduled tasks colliding", "scheduled jobs firing simultaneously"),
    "the month-end run": ("the closing of the books", "the last-day-of-period processing"),
    "a region outage": ("a datacenter zone going down", "losing an entire cloud zone"),
}
RULE_WORDS: dict[str, tuple[str, str]] = {  # bare verb phrases: "must {rule}"
    "have an owner in CODEOWNERS": ("list a responsible maintainer", "name someone accountable for it"),
    "log a request id": ("record the correlation identifier", "write the trace identifier to output"),
    "be idempotent": ("be safe to repeat", "tolerate being applied twice"),
    "ship behind a feature flag": ("be toggleable at runtime", "be switchable off without a release"),
    "carry a migration rollback note": ("explain how to undo the schema change",
                                        "describe how to revert its database step"),
    "include a test for the bug it fixes": ("come with a regression check",
                                            "add an automated check reproducing the defect"),
    "avoid floats for money": ("use exact decimals for amounts", "never use binary fractions for currency"),
    "set explicit timeouts": ("define deadlines on every call", "bound how long each call may wait"),
    "pin dependency versions": ("lock libraries to exact releases", "freeze third-party package numbers"),
    "use UTC timestamps": ("record times in coordinated universal time", "keep moments in Zulu time"),
    "document its env vars": ("describe its environment settings", "list the settings it reads from the environment"),
    "return problem+json errors": ("answer failures in RFC 7807 format", "reply with RFC 7807 bodies on failure"),
}
ARTIFACT_WORDS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {  # (singular, plural) twice
    "migration": (("schema change", "schema changes"), ("database evolution script", "database evolution scripts")),
    "pull request": (("change proposal", "change proposals"), ("patch under review", "patches under review")),
    "endpoint": (("route", "routes"), ("HTTP handler", "HTTP handlers")),
    "background job": (("queued task", "queued tasks"), ("async task", "async tasks")),
    "feature flag": (("toggle", "toggles"), ("runtime switch", "runtime switches")),
    "config key": (("setting", "settings"), ("configuration entry", "configuration entries")),
    "dashboard": (("monitoring board", "monitoring boards"), ("Grafana page", "Grafana pages")),
    "alert": (("pager rule", "pager rules"), ("on-call notification", "on-call notifications")),
    "runbook": (("ops playbook", "ops playbooks"), ("operations guide", "operations guides")),
    "library upgrade": (("dependency bump", "dependency bumps"), ("package update", "package updates")),
    "public API change": (("external interface edit", "external interface edits"),
                          ("edit to the published contract", "edits to the published contract")),
    "cron job": (("scheduled task", "scheduled tasks"), ("timed batch", "timed batches")),
}
ACTION_WORDS: dict[str, tuple[str, str]] = {  # verb phrases before their object
    "Migrate": ("move", "port"),
    "Remove": ("get rid of", "delete"),
    "Add metrics for": ("instrument", "put measurements on"),
    "Write a runbook for": ("produce an operations guide for", "draft on-call procedures for"),
    "Add retries to": ("build automatic re-attempts into", "make repeated attempts happen in"),
    "Deduplicate": ("collapse repeated copies of", "merge identical entries among"),
    "Rotate": ("renew", "cycle out"),
    "Backfill": ("populate historical", "fill in past values of"),
    "Document": ("write up", "describe"),
    "Load-test": ("stress", "hammer with synthetic traffic"),
    "Add an alert on": ("set up paging for", "page someone about"),
    "Clean up": ("tidy", "prune"),
}
# fmt: on
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)  # fmt: skip

# A changed generator list must fail here, not yield questions that quietly fit nothing.
for _words, _source in (
    (REASON_WORDS, REASONS),
    (FAILURE_WORDS, FAILURES),
    (CAUSE_WORDS, CAUSES),
    (TRIGGER_WORDS, TRIGGERS),
    (RULE_WORDS, RULES),
    (ARTIFACT_WORDS, ARTIFACTS),
    (ACTION_WORDS, TODO_ACTIONS),
):
    assert set(_words) == set(_source), sorted(set(_words) ^ set(_source))

# ---------------------------------------------------------------- fact templates


@dataclass(frozen=True)
class FactTemplate:
    """One of bench.dataset's sentence forms, with its questions.

    pattern: the generator's f-string with named slots (first letter as generated; matching ignores case).
    group: templates stating the same relation share one (and slot names), so a question of one can be answered
    by a note of the other; the ambiguity check compares notes within a group.
    asks: the slots a short question leaves out (its answer); short: those questions; full: questions naming
    every slot but the identifiers, for when the short one fits more than one note.
    """

    name: str
    pattern: str
    short: tuple[str, ...]
    full: tuple[str, ...] = ()
    asks: tuple[str, ...] = ()
    group: str = ""


# Slot name → the vocabulary it is drawn from (a ProjectVocab field, a shared list) or a regular expression.
IDENTIFIERS = {"adr", "pr", "ticket", "version", "prefix"}  # never in a question, never part of a key
PATTERNS = {
    "n": r"\d+",
    "k": r"\d+",
    "adr": r"\d+",
    "pr": r"\d+",
    "date": r"\d{4}-\d{2}-\d{2}",
    "ticket": r"[A-Z]+-\d+",
    "version": r"\d+\.\d+",
    "prefix": r"[a-z]+_[a-z0-9]+_",
}

# fmt: off
TEMPLATES: tuple[FactTemplate, ...] = (
    # decisions
    FactTemplate(
        "decision_keep", "We decided to keep {thing} in {s1} instead of {s2} {reason}.",
        ("did we pick {s1} over {s2} as the home of {thing} {reason}?",
         "{thing}: held in {s1}, not {s2}, {reason}"),
    ),
    FactTemplate(
        "decision_adr", "ADR-{adr}: {c1} uses {tech} for {thing}; {alt} was rejected {reason}.",
        ("what does {c1} rely on for {thing} now that {alt} got turned down {reason}?",
         "architecture record: the technology {c1} employs for {thing}, {alt} having been dismissed {reason}"),
        ("architecture record: {c1} employs {tech} for {thing}, {alt} having been dismissed {reason}",),
        asks=("tech",), group="choice",
    ),
    FactTemplate(
        "decision_who", "Decision ({who}, {date}): {thing} are written by {c1} only, never by {c2}.",
        ("{who}'s ruling from {date}: which component is the sole producer of {thing}, with {c2} barred from it?",
         "on {date} {who} settled what alone may produce {thing}, {c2} excluded: which one?"),
        ("{who}'s ruling from {date}: {c1} is the sole producer of {thing}, {c2} barred from it?",),
        asks=("c1",),
    ),
    FactTemplate(
        "decision_chose", "We chose {tech} over {alt} for {c1} {reason}.",
        ("was {tech} preferred to {alt} in {c1} {reason}?", "{c1}: {tech} picked instead of {alt} {reason}"),
        group="choice",
    ),
    FactTemplate(
        "decision_cache", "{c1} caches {thing} for {n} seconds {reason}.",
        ("how long does {c1} hold on to {thing} in memory {reason}?",
         "expiry of the {thing} memo inside {c1}, picked {reason}"),
        ("does {c1} hold on to {thing} in memory for {n} secs {reason}?",),
        asks=("n",),
    ),
    FactTemplate(
        "decision_handover", "Agreed with {who}: {c1} stops reading {thing} from {s1} once {c2} owns them.",
        ("according to {who}, which component takes ownership of {thing} so {c1} no longer pulls them out of {s1}?",
         "{who}'s deal: {c1} ceases loading {thing} from {s1} after what takes them over?"),
        ("{who}'s deal: {c1} ceases loading {thing} from {s1} after {c2} takes them over?",),
        asks=("c2",),
    ),
    # conventions
    FactTemplate(
        "convention_every", "Convention: every {artifact} in {c1} must {rule}.",
        ("what does {c1} require of each {artifact}?", "team norm for any {artifact} inside {c1}"),
        ("must each {artifact} in {c1} {rule}?", "{c1} standard: any {artifact} has to {rule}"),
        asks=("rule",),
    ),
    FactTemplate(
        "convention_always", "Always {rule2} when touching {thing} in {c1}.",
        ("what is expected of us whenever we modify {thing} inside {c1}?",),
        ("when we modify {thing} inside {c1}, should we {rule2}?",),
        asks=("rule",),
    ),
    FactTemplate(
        "convention_naming", "Naming: {artifact}s for {thing} are prefixed with `{prefix}`.",
        ("what do {artifacts} dealing with {thing} get as the start of their name?",
         "identifier lead-in for {artifacts} about {thing}"),
    ),
    FactTemplate(
        "convention_review",
        "Code review rule from {who}: no {artifact} merges without a second approver if it changes {thing}.",
        ("did {who} insist on two sign-offs for any {artifact} that modifies {thing}?",
         "{who}'s policy on {artifacts} altering {thing}: how many reviewers must agree?"),
    ),
    FactTemplate(
        "convention_mask", "Keep {thing} out of logs; {c1} masks them in the formatter {reason}.",
        ("does {c1} redact {thing} from its printed diagnostics {reason}?",
         "{c1} scrubbing {thing} from diagnostic output {reason}"),
    ),
    # incidents
    FactTemplate(
        "incident_root", "Incident {date}: {c1} {failure} after {trigger}; root cause was {cause}. Fixed in PR #{pr}.",
        ("what was the underlying reason {c1} {failure} following {trigger} on {date}?",
         "{date}: {c1} {failure} right after {trigger}; what was to blame?"),
        ("{date}: {c1} {failure} right after {trigger}; was {cause} to blame?",),
        asks=("cause",),
    ),
    FactTemplate(
        "incident_outage", "Outage on {date}: {thing} in {s1} were unavailable for {n} minutes because of {cause}.",
        ("how long were {thing} in {s1} inaccessible on {date} due to {cause}?",
         "{date} downtime of {thing} kept in {s1}, {cause}: duration?"),
        ("were {thing} in {s1} inaccessible for {n} mins on {date} due to {cause}?",),
        asks=("n",),
    ),
    FactTemplate(
        "incident_bug", "Bug: {c1} {failure} when {thing} exceed {n}; workaround is restarting {c2}.",
        ("how do we get around {c1} that {failure} once {thing} go past {n}?",
         "{c1} {failure} with more than {n} {thing}: temporary remedy?"),
        ("{c1} {failure} with more than {n} {thing}: is bouncing {c2} the temporary remedy?",),
        asks=("c2",),
    ),
    FactTemplate(
        "incident_postmortem", "Postmortem ({who}): {c1} {failure} during {trigger}, {n} customers affected.",
        ("how many clients were hit when {c1} {failure} amid {trigger}, per {who}'s write-up?",
         "{who}'s incident review: {c1} {failure} in the middle of {trigger}; impact?"),
        ("{who}'s incident review: {c1} {failure} in the middle of {trigger}; were {n} clients hit?",),
        asks=("n",),
    ),
    FactTemplate(
        "incident_known", "Known issue: {tech} in {c1} {failure} under load; tracked as {ticket}.",
        ("is there an open problem where {tech} inside {c1} {failure} with heavy traffic?",
         "{c1}'s {tech} {failure} when busy: which ticket?"),
    ),
    # commands
    FactTemplate(
        "command_rebuild", "To rebuild {thing} locally, run `{cmd}`.",
        ("how do I regenerate {thing} on my own machine?",),
        ("does {cmd} regenerate {thing} on a dev machine?",),
        asks=("cmd",),
    ),
    FactTemplate(
        "command_check", "`{cmd}` is how we check {c1} before a release.",
        ("which command verifies {c1} ahead of shipping?",),
        ("is {cmd} our pre-ship verification for {c1}?",),
        asks=("cmd",),
    ),
    FactTemplate(
        "command_after", "Run `{cmd}` after changing {thing}, otherwise {c2} breaks.",
        ("what must follow an edit to {thing} so that {c2} keeps working?",),
        ("do we need {cmd} once {thing} are modified, or {c2} fails?",),
        asks=("cmd",),
    ),
    FactTemplate(
        "command_debug", "{who} uses `{cmd}` to debug {c1}; it needs access to {s1}.",
        ("what does {who} invoke to troubleshoot {c1}, the one requiring {s1} permissions?",),
        ("{who} troubleshoots {c1} with {cmd}, which requires {s1} permissions?",),
        asks=("cmd",),
    ),
    FactTemplate(
        "command_ci", "CI runs `{cmd}` on every push to {c1}; it takes about {n} seconds.",
        ("how long does the {cmd} pipeline step for {c1} last?",),
        ("does the {cmd} pipeline step for {c1} last roughly {n} secs?",),
        asks=("n",),
    ),
    # architecture
    FactTemplate(
        "arch_grpc", "{c1} talks to {c2} over gRPC and retries {k} times with backoff.",
        ("how many attempts does {c1} make when calling {c2} via remote procedure calls?",),
        ("does {c1} attempt {k} repeats with growing delays when calling {c2}?",),
        asks=("k",),
    ),
    FactTemplate(
        "arch_ttl", "{c1} stores {thing} in {s1} with a TTL of {n} minutes.",
        ("how long before {thing} written by {c1} into {s1} expire?",),
        ("do {thing} that {c1} writes to {s1} expire after {n} mins?",),
        asks=("n",),
    ),
    FactTemplate(
        "arch_reads", "{c1} reads {thing} from {s1}; writes go through {c2}.",
        ("{c1} fetches {thing} out of {s1}; which component handles updating them?",),
        ("{c1} fetches {thing} out of {s1} while {c2} handles updating them?",),
        asks=("c2",),
    ),
    FactTemplate(
        "arch_built", "{c1} is built on {tech} and publishes {thing} events to {s2}.",
        ("where does the {tech}-based {c1} emit notifications about {thing}?",),
        ("does the {tech}-based {c1} emit notifications about {thing} into {s2}?",),
        asks=("s2",),
    ),
    FactTemplate(
        "arch_shards", "{c1} shards {thing} across {k} partitions in {s1}.",
        ("into how many pieces does {c1} split {thing} within {s1}?",),
        ("does {c1} split {thing} into {k} pieces within {s1}?",),
        asks=("k",),
    ),
    FactTemplate(
        "arch_startup", "{c1} depends on {c2} being up at startup to load {thing} from {s1}.",
        ("does {c1} need {c2} running when it boots to fetch {thing} out of {s1}?",
         "boot requirement of {c1}: {c2} available so {thing} can come from {s1}"),
    ),
    FactTemplate(
        "arch_memory", "{c1} keeps {thing} in memory, about {n} MB per replica.",
        ("how much RAM do {thing} take in each {c1} instance?",),
        ("do {thing} take roughly {n} megabytes of RAM in each {c1} instance?",),
        asks=("n",),
    ),
    # frontier items
    FactTemplate(
        "todo_release", "TODO: {action} {thing} in {c1} before release {version}.",
        ("which version is the deadline to {action} {thing} within {c1}?",
         "outstanding task: {action} {thing} inside {c1}; target version?"),
    ),
    FactTemplate(
        "todo_asked", "{action} {thing} in {c1}; {who} asked for it by {date}.",
        ("when does {who} want us to {action} {thing} within {c1}?",),
        ("does {who} want us to {action} {thing} within {c1} by {date}?",),
        asks=("date",),
    ),
    FactTemplate(
        "todo_next", "Next step: {action} {thing} handled by {c1}, then re-run `{cmd}`.",
        ("what follows once we {action} the {thing} that {c1} manages?",),
        ("after we {action} the {thing} that {c1} manages, is {cmd} repeated?",),
        asks=("cmd",),
    ),
    FactTemplate(
        "todo_pending", "Pending: {action} {thing} once {c2} is migrated to {tech}.",
        ("waiting on {c2} moving onto {tech} before we {action} {thing}?",
         "blocked until {c2} sits on {tech}: {action} {thing}"),
    ),
)
# fmt: on


def _vocab(slot: str, project: ProjectVocab) -> Sequence[str]:
    """The values a slot is drawn from in `project` (empty: the slot has a regular expression instead)."""
    table: dict[str, Sequence[str]] = {
        "c": project.components,
        "s": project.stores,
        "thing": project.things,
        "tech": project.tech,
        "alt": project.tech,
        "cmd": project.commands,
        "who": PEOPLE,
        "reason": REASONS,
        "failure": FAILURES,
        "cause": CAUSES,
        "trigger": TRIGGERS,
        "rule": RULES,
        "rule2": [_rule2(rule) for rule in RULES],
        "artifact": ARTIFACTS,
        "action": TODO_ACTIONS,
    }
    return table.get(slot, table.get(slot.rstrip("0123456789"), ()))  # c1, c2 → c; rule2 is its own


def _rule2(rule: str) -> str:
    """The generator's "Always …" form of a rule."""
    return rule.replace("be ", "make it ")


@dataclass(frozen=True)
class Fact:
    """A stored note read back as its template and slot values (vocabulary spellings)."""

    template: FactTemplate
    project: ProjectVocab
    slots: dict[str, str]

    def key(self, names: Sequence[str]) -> frozenset[tuple[str, str]]:
        return frozenset((name, self.slots[name]) for name in names)


class Parser:
    """Template regexes per project, built from the vocabularies (alternations, longest first)."""

    def __init__(self) -> None:
        self.compiled: dict[str, list[tuple[FactTemplate, re.Pattern[str], dict[str, dict[str, str]]]]] = {}
        for project in PROJECTS:
            entries = []
            for template in TEMPLATES:
                canonical: dict[str, dict[str, str]] = {}
                regex = ""
                position = 0
                for match in re.finditer(r"\{(\w+)\}", template.pattern):
                    regex += re.escape(template.pattern[position : match.start()])
                    slot = match.group(1)
                    values = _vocab(slot, project)
                    if values:
                        canonical[slot] = {value.lower(): value for value in values}
                        alternation = "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))
                    else:
                        alternation = PATTERNS[slot]
                    regex += f"(?P<{slot}>{alternation})"
                    position = match.end()
                regex += re.escape(template.pattern[position:])
                entries.append((template, re.compile(regex, re.IGNORECASE), canonical))
            self.compiled[project.name] = entries

    def parse(self, project_name: str, content: str) -> Fact | None:
        project = next((p for p in PROJECTS if p.name == project_name), None)
        if project is None:
            return None
        for template, regex, canonical in self.compiled[project.name]:
            match = regex.fullmatch(content)
            if match is None:
                continue
            slots = {}
            for slot, value in match.groupdict().items():
                slots[slot] = canonical[slot][value.lower()] if slot in canonical else value
            if "rule2" in slots:  # one slot name for the rule in every template
                slots["rule"] = RULES[[_rule2(rule) for rule in RULES].index(slots.pop("rule2"))]
            return Fact(template, project, slots)
        return None


def parse_thoughts(rows: Sequence[tuple[str, str]]) -> list[Fact | None]:
    """(project name, content) rows → their facts (None: not a bench.dataset template)."""
    parser = Parser()
    return [parser.parse(project, content) for project, content in rows]


# ---------------------------------------------------------------- questions


def _date_words(date: str, rng: random.Random) -> str:
    year, month, day = (int(part) for part in date.split("-"))
    if rng.random() < 0.5:
        return f"{day} {MONTHS[month - 1]} {year}"
    return f"{MONTHS[month - 1]} {day}, {year}"


def _strip_article(name: str) -> str:
    return name.removeprefix("the ")


def render(fact: Fact, form: str, rng: random.Random) -> str:
    """A question form filled with the fact's slots: names and numbers as stored, phrases reworded."""
    slots = fact.slots
    words: dict[str, str] = {}
    for name, value in slots.items():
        base = name.rstrip("0123456789")
        variant = rng.randrange(2)
        if base in ("c", "s"):
            words[name] = _strip_article(value)
        elif base == "reason":
            words[name] = REASON_WORDS[value][variant]
        elif base == "failure":
            words[name] = FAILURE_WORDS[value][variant]
        elif base == "cause":
            words[name] = CAUSE_WORDS[value][variant]
        elif base == "trigger":
            words[name] = TRIGGER_WORDS[value][variant]
        elif base == "rule":
            phrase = RULE_WORDS[value][variant]
            words["rule"] = phrase
            words["rule2"] = "make it " + phrase.removeprefix("be ") if phrase.startswith("be ") else phrase
        elif base == "artifact":
            words["artifact"], words["artifacts"] = ARTIFACT_WORDS[value][variant]
        elif base == "action":
            words[name] = ACTION_WORDS[value][variant]
        elif base == "date":
            words[name] = _date_words(value, rng)
        else:  # things, tools, people, commands, numbers
            words[name] = value
    question = form.format(**words)
    return question[0].upper() + question[1:]


def _named_slots(form: str) -> list[str]:
    names = {"rule2": "rule", "artifacts": "artifact"}
    return sorted({names.get(slot, slot) for slot in re.findall(r"\{(\w+)\}", form)})


# A short question leaves out what it asks for; a full one names it (a slip here would make a question that
# hands over its answer, or one that cannot tell its target from the notes that differ only there).
for _template in TEMPLATES:
    assert all(not set(_template.asks) & set(_named_slots(form)) for form in _template.short), _template.name
    assert all(set(_template.asks) <= set(_named_slots(form)) for form in _template.full), _template.name


@dataclass
class Question:
    index: int  # of the target among the rows read
    target: uuid.UUID
    project: str
    template: str
    form: str  # "short" (leaves out what it asks) or "full"
    text: str
    content: str


def make_questions(
    facts: Sequence[Fact | None], rows: Sequence[tuple[uuid.UUID, str, str]], n: int, seed: int
) -> tuple[list[Question], dict[str, int]]:
    """`n` questions, targets drawn uniformly from `rows` (id, project, content) with a seeded RNG.

    A question fits its target alone when no other note of its group holds every slot it names; a short one
    that does not gives way to a full one, a full one that does not skips the target.
    """
    rng = random.Random(seed)
    by_group: dict[str, list[int]] = defaultdict(list)
    for index, fact in enumerate(facts):
        if fact is not None:
            by_group[fact.template.group or fact.template.name].append(index)

    items = [_items(fact) for fact in facts]

    def fits_alone(index: int, key: frozenset[tuple[str, str]], group: str) -> bool:
        return not any(other != index and key <= items[other] for other in by_group[group])

    order = list(range(len(rows)))
    rng.shuffle(order)
    questions: list[Question] = []
    counts = {"drawn": 0, "not_a_template": 0, "ambiguous": 0, "short": 0, "full": 0}
    for index in order:
        if len(questions) >= n:
            break
        counts["drawn"] += 1
        fact = facts[index]
        if fact is None:
            counts["not_a_template"] += 1
            continue
        template = fact.template
        group = template.group or template.name
        chosen: tuple[str, str] | None = None
        for kind, forms in (("short", template.short), ("full", template.full)):
            if not forms:
                continue
            form = rng.choice(forms)
            if fits_alone(index, fact.key(_named_slots(form)), group):
                chosen = (kind, form)
                break
        if chosen is None:
            counts["ambiguous"] += 1
            continue
        kind, form = chosen
        counts[kind] += 1
        target, project, content = rows[index]
        questions.append(Question(index, target, project, template.name, kind, render(fact, form, rng), content))
    return questions, counts


def _items(fact: Fact | None) -> frozenset[tuple[str, str]]:
    return frozenset() if fact is None else frozenset((name, value) for name, value in fact.slots.items())


# ---------------------------------------------------------------- reference rankings


STEMMER = Stemmer.Stemmer("english")


def tokens(texts: Sequence[str]) -> list[list[str]]:
    """bm25s's tokenizer with its English stop words and the PyStemmer English stemmer."""
    result: list[list[str]] = bm25s.tokenize(
        list(texts), stopwords="en", stemmer=STEMMER, return_ids=False, show_progress=False
    )
    return result


@dataclass
class Scope:
    """The active thoughts one search reads (a project, or all): a BM25 index and rows of the embedding matrix."""

    members: np.ndarray  # row indexes into the store arrays
    bm25: bm25s.BM25 = field(init=False)

    def build(self, contents: Sequence[str]) -> Scope:
        self.bm25 = bm25s.BM25(k1=BM25_K1, b=BM25_B)
        corpus = bm25s.tokenize(
            [contents[i] for i in self.members], stopwords="en", stemmer=STEMMER, show_progress=False
        )
        self.bm25.index(corpus, show_progress=False)
        return self

    def bm25_ranking(self, query: str, depth: int) -> list[int]:
        """Store rows of the best `depth` documents that match a query term, best first."""
        words = tokens([query])[0]
        if not words:
            return []
        scores = self.bm25.get_scores(words)
        top = _top(scores, depth)
        return [int(self.members[i]) for i in top if scores[i] > 0]

    def cosine_ranking(self, matrix: np.ndarray, vector: np.ndarray, depth: int) -> list[int]:
        scores = matrix[self.members] @ vector
        return [int(self.members[i]) for i in _top(scores, depth)]


def _top(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indexes of the `depth` highest scores, highest first (ties by index, stable)."""
    if len(scores) > depth:
        part = np.argpartition(-scores, depth)[:depth]
        return part[np.lexsort((part, -scores[part]))]
    return np.lexsort((np.arange(len(scores)), -scores))


def rrf(*rankings: Sequence[int], k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion, ranks from 1, as the service fuses its legs."""
    scores: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, row in enumerate(ranking, start=1):
            scores[row] += 1.0 / (k + rank)
    return sorted(scores, key=lambda row: (-scores[row], row))


# ---------------------------------------------------------------- the section


@dataclass
class Store:
    """The active thoughts as the service reads them: ids, projects, contents, unit embedding rows."""

    ids: list[uuid.UUID]
    projects: list[str]
    contents: list[str]
    matrix: np.ndarray

    @property
    def row_of(self) -> dict[uuid.UUID, int]:
        return {thought_id: row for row, thought_id in enumerate(self.ids)}


async def read_store(db: Database, model: str = OFFLINE_MINILM) -> Store:
    """Every active thought with an embedding of `model` (what both legs can return), in id order."""
    statement = text(
        "SELECT t.id, p.name, t.content, t.embedding FROM thought t JOIN project p ON p.id = t.project_id "
        "WHERE t.status = 'active' AND t.embedding_model = :m ORDER BY t.id"
    )
    async with db.unit_of_work() as session:
        rows = (await session.execute(statement, {"m": model})).all()
    matrix = np.vstack([np.asarray(row.embedding.to_numpy(), dtype=np.float32) for row in rows])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return Store([row.id for row in rows], [row.name for row in rows], [row.content for row in rows], matrix)


def rank_of(ranking: Sequence[Any], target: Any, depth: int = LIMIT) -> int | None:
    """1-based position of the target in the first `depth` entries."""
    for position, item in enumerate(ranking[:depth], start=1):
        if item == target:
            return position
    return None


def summarise(ranks: Sequence[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {
        "hit@1": round(sum(1 for r in ranks if r == 1) / n, 3),
        "hit@5": round(sum(1 for r in ranks if r is not None and r <= 5) / n, 3),
        "hit@10": round(sum(1 for r in ranks if r is not None) / n, 3),
        "mrr@10": round(sum(1 / r for r in ranks if r is not None) / n, 3),
    }


def overlap(question: str, target: str) -> float:
    """Share of the question's stemmed non-stop-words that occur in the target (the words they share)."""
    q, t = tokens([question, target])
    return len(set(q) & set(t)) / max(1, len(set(q)))


async def quality_section(
    db: Database, runtime: EmbeddingRuntime, questions_n: int, unscoped_n: int, seed: int = SEED
) -> dict[str, Any]:
    """Hit@1/5/10 of the service's modes and of the reference rankings, per scope; prints the table."""
    started = time.perf_counter()
    assert runtime.profile is not None, "the quality section needs a loaded embedder"
    model = runtime.profile.model_id  # the model of the store's vectors, the server and the references
    store = await read_store(db, model)
    facts = parse_thoughts(list(zip(store.projects, store.contents, strict=True)))
    parsed = sum(1 for fact in facts if fact is not None)
    rows = list(zip(store.ids, store.projects, store.contents, strict=True))
    questions, counts = make_questions(facts, rows, questions_n, seed)
    if len(questions) < questions_n:
        raise SystemExit(f"quality: only {len(questions)} unambiguous questions of {questions_n} ({counts})")
    scopes: dict[str | None, Scope] = {None: Scope(np.arange(len(store.ids))).build(store.contents)}
    for name in sorted({question.project for question in questions}):
        members = np.array([i for i, project in enumerate(store.projects) if project == name])
        scopes[name] = Scope(members).build(store.contents)
    prepared_s = time.perf_counter() - started

    principal = await admin_principal(db, "bench-search-quality")
    lexical_runtime = EmbeddingRuntime(  # never loaded: no embedder, so the service answers from the lexical leg
        EmbeddingSettings(model=model, cache_dir=model_cache_dir())
    )
    callers = {
        "embedder": tool_caller(AppContext(db, runtime, settings_for(model)), principal),
        "lexical": tool_caller(AppContext(db, lexical_runtime, settings_for(model)), principal),
    }
    arguments_of: dict[str, tuple[str, dict[str, Any]]] = {
        "hybrid": ("embedder", {}),
        "hybrid_gate0": ("embedder", {"min_relevance": 0}),
        "vector": ("embedder", {"hybrid": False}),
        "lexical": ("lexical", {}),
    }
    cwd_of = {project.name: project.cwd for project in PROJECTS}
    depth = pool_size(LIMIT)  # the pool each service leg fuses
    per_question: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    call_seconds: dict[str, list[float]] = defaultdict(list)
    for scope_name, chosen in (("project", questions), ("unscoped", questions[:unscoped_n])):
        ranks: dict[str, list[int | None]] = defaultdict(list)
        returned: dict[str, list[int]] = defaultdict(list)
        by_template: dict[str, dict[str, list[int | None]]] = defaultdict(lambda: defaultdict(list))
        for question in chosen:
            entry: dict[str, Any] = {
                "scope": scope_name,
                "question": question.text,
                "target": question.content,
                "project": question.project,
                "template": question.template,
                "form": question.form,
                "ranks": {},
            }
            for mode, (caller, extra) in arguments_of.items():
                arguments = {"action": "search", "query": question.text, "limit": LIMIT, **extra}
                if scope_name == "project":
                    arguments["cwd"] = cwd_of[question.project]
                begin = time.perf_counter()
                answer = await callers[caller]("memory_recall", arguments)
                call_seconds[mode].append(time.perf_counter() - begin)
                if bool(answer["meta"].get("degraded")) != (mode == "lexical"):
                    raise SystemExit(f"quality {mode}: degraded={answer['meta'].get('degraded')}")
                found = [uuid.UUID(item["thought"]["id"]) for item in answer["items"]]
                ranks[mode].append(rank_of(found, question.target))
                returned[mode].append(len(found))
            scope = scopes[question.project if scope_name == "project" else None]
            vector: Vector | None = await runtime.embed_query(question.text)
            assert vector is not None
            bm25_rows = scope.bm25_ranking(question.text, depth)
            cosine_rows = scope.cosine_ranking(store.matrix, np.asarray(vector, dtype=np.float32), depth)
            references = {"ref_bm25s": bm25_rows, "ref_cosine": cosine_rows, "ref_rrf": rrf(bm25_rows, cosine_rows)}
            for name, ranking in references.items():
                ranks[name].append(rank_of(ranking, question.index))
            for name in (*MODES, *REFERENCES):
                entry["ranks"][name] = ranks[name][-1]
                by_template[question.template][name].append(ranks[name][-1])
            per_question.append(entry)
        table = {name: summarise(ranks[name]) for name in (*MODES, *REFERENCES)}
        for mode in MODES:
            table[mode]["rows"] = round(statistics.mean(returned[mode]), 2)
        results[scope_name] = {
            "questions": len(chosen),
            "table": table,
            "hit@5_by_template": {
                template: {"n": len(values["hybrid"]), **{k: summarise(v)["hit@5"] for k, v in values.items()}}
                for template, values in sorted(by_template.items())
            },
        }
    out: dict[str, Any] = {
        "questions": len(questions),
        "unscoped": min(unscoped_n, len(questions)),
        "seed": seed,
        "limit": LIMIT,
        "store_active_thoughts": len(store.ids),
        "parsed_as_templates": parsed,
        "targets": counts,
        "questions_by_project": {
            name: sum(1 for q in questions if q.project == name)
            for name in [p.name for p in PROJECTS]
            if any(q.project == name for q in questions)
        },
        "mean_shared_word_share": round(statistics.mean(overlap(q.text, q.content) for q in questions), 3),
        "reference": {
            "bm25s": f"bm25s {bm25s.__version__} BM25 k1 {BM25_K1} b {BM25_B}, stop words en, PyStemmer english",
            "cosine": "exact cosine over the stored embeddings (float32, numpy)",
            "rrf": f"RRF k={RRF_K} of the first {depth} of ref_bm25s and ref_cosine",
        },
        "call_ms_p50": {mode: round(statistics.median(s) * 1000, 2) for mode, s in call_seconds.items()},
        "prepare_s": round(prepared_s, 1),
        "seconds": round(time.perf_counter() - started, 1),
        **results,
        "per_question": per_question,
    }
    print_quality(out)
    return out


LABELS = {
    "hybrid": "service hybrid (default args)",
    "hybrid_gate0": "service hybrid, min_relevance 0",
    "vector": "service vector (hybrid false)",
    "lexical": "service lexical (no embedder)",
    "ref_bm25s": "reference BM25 (bm25s)",
    "ref_cosine": "reference cosine (exact)",
    "ref_rrf": "reference RRF(bm25s, cosine)",
}


def print_quality(out: dict[str, Any]) -> None:
    counts = out["targets"]
    print(
        f"  quality: {out['questions']} questions over {out['store_active_thoughts']} active thoughts "
        f"({counts['short']} short, {counts['full']} full; {counts['ambiguous']} targets skipped as ambiguous, "
        f"{counts['not_a_template']} not a template), by project {out['questions_by_project']}, "
        f"mean shared-word share {out['mean_shared_word_share']}",
        flush=True,
    )
    for scope in ("project", "unscoped"):
        section = out[scope]
        title = "scoped by cwd to the target's project" if scope == "project" else "no cwd (all projects)"
        print(f"  quality, {section['questions']} questions, {title}, limit {out['limit']}:", flush=True)
        print(f"    {'mode':<34}{'hit@1':>7}{'hit@5':>7}{'hit@10':>8}{'MRR':>7}{'rows':>6}", flush=True)
        for name, row in section["table"].items():
            rows = f"{row['rows']:6.1f}" if "rows" in row else ""
            print(
                f"    {LABELS[name]:<34}{row['hit@1']:7.3f}{row['hit@5']:7.3f}{row['hit@10']:8.3f}"
                f"{row['mrr@10']:7.3f}{rows}",
                flush=True,
            )
    print(f"  quality: p50 ms per call {out['call_ms_p50']}, {out['seconds']} s in all", flush=True)
