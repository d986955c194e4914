"""One log format for every library, and the expected conditions that are not errors (issue 22)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from starlette.requests import ClientDisconnect

from app.cli import log_format, log_level
from app.config import Settings
from app.observability import configure_logging, expected_failures, route_loguru


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """configure_logging's handler, writing into a buffer; the root logger's handlers restored afterwards."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging("INFO", "text")
    stream = io.StringIO()
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    try:
        yield stream
    finally:
        root.handlers, root.level = saved[0], saved[1]
        logging.captureWarnings(False)


def test_the_format_is_text_on_a_terminal_unless_set() -> None:
    unset = Settings(_env_file=None)  # type: ignore[call-arg]
    chosen = Settings(_env_file=None, log_format="json")  # type: ignore[call-arg]
    assert log_format(unset, terminal=True) == "text" and log_format(unset, terminal=False) == "json"
    assert log_format(chosen, terminal=True) == "json"
    assert log_level(unset, serving=False, verbose=False) == "WARNING"
    assert log_level(unset, serving=False, verbose=True) == log_level(unset, serving=True, verbose=False) == "INFO"


def test_a_client_disconnect_is_one_line(captured: io.StringIO) -> None:
    transport = logging.getLogger("mcp.server.streamable_http")
    try:
        raise ClientDisconnect()
    except ClientDisconnect:
        transport.exception("Error handling POST request")
    transport.info("Terminating session: None")
    [line] = captured.getvalue().splitlines()
    assert " INFO mcp.server.streamable_http: client disconnected before its request was read" in line
    try:
        raise ValueError("a real failure")
    except ValueError:
        transport.exception("Error handling POST request")
    assert "ERROR" in captured.getvalue() and "Traceback" in captured.getvalue()  # other errors keep theirs


def test_loguru_goes_through_logging_and_an_expected_probe_is_not_an_error(captured: io.StringIO) -> None:
    from loguru import logger as loguru_logger

    route_loguru()
    with expected_failures():
        loguru_logger.error("Could not find the model tar.gz file")  # fastembed's cache probe
    loguru_logger.error("a real failure")
    lines = captured.getvalue().splitlines()
    assert len(lines) == 1 and " ERROR " in lines[0] and lines[0].endswith("a real failure"), lines
