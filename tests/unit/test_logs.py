"""Log output: one JSON object per line for `eventflow serve`, with the trace
of the span that logged; readable text for the dev stack."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from libs.config import Settings
from libs.logs import JsonFormatter, configure_logging

tracer = TracerProvider().get_tracer("test")


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter("eventflow-vault"))
    logger = logging.getLogger(f"test.logs.{id(out)}")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, out


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_record_is_one_json_object_with_level_logger_message_and_service(
    logged: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = logged
    logger.warning("rewrapped %d of %d\nsecond line", 3, 4)
    [line] = lines(out)
    assert line["level"] == "WARNING"
    assert line["logger"] == logger.name
    assert line["message"] == "rewrapped 3 of 4\nsecond line"
    assert line["service"] == "eventflow-vault"
    assert line["time"].endswith("+00:00")
    assert "trace_id" not in line and "span_id" not in line


def test_a_record_logged_inside_a_span_names_its_trace_and_span(
    logged: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = logged
    with tracer.start_as_current_span("step") as span:
        logger.info("inside")
    logger.info("outside")
    inside, outside = lines(out)
    context = span.get_span_context()
    assert inside["trace_id"] == f"{context.trace_id:032x}"
    assert inside["span_id"] == f"{context.span_id:016x}"
    assert "trace_id" not in outside


def test_an_exception_stays_on_the_line_as_a_field(
    logged: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = logged
    try:
        raise RuntimeError("relay failed")
    except RuntimeError:
        logger.exception("outbox relay failed; retrying")
    [line] = lines(out)
    assert line["message"] == "outbox relay failed; retrying"
    assert "RuntimeError: relay failed" in line["exception"]


def test_extra_fields_are_not_copied_into_the_line(
    logged: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = logged
    logger.info("resolved %d keys", 1, extra={"value": "sk_live_CANARY_extra"})
    [line] = lines(out)
    assert line["message"] == "resolved 1 keys"
    assert "sk_live_CANARY_extra" not in out.getvalue()


def test_configure_logging_picks_json_or_text_for_the_root_logger() -> None:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    root.handlers[:] = []  # configure_logging replaces (and closes) the root's handlers
    try:
        out = io.StringIO()
        configure_logging("info", "json", "eventflow-registry", stream=out)
        logging.getLogger("eventflow").info("serving on %s", "127.0.0.1:7233")
        logging.getLogger("eventflow").debug("below the level")
        [line] = lines(out)
        assert (line["message"], line["service"]) == (
            "serving on 127.0.0.1:7233",
            "eventflow-registry",
        )

        text = io.StringIO()
        configure_logging("INFO", "text", stream=text)
        logging.getLogger("eventflow").info("serving on %s", "127.0.0.1:7233")
        assert text.getvalue().rstrip().endswith("INFO eventflow serving on 127.0.0.1:7233")
        with pytest.raises(ValueError, match="json, text"):
            configure_logging("INFO", "xml")
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = saved[1]
        root.setLevel(saved[0])


def test_the_log_format_setting_takes_json_text_or_empty() -> None:
    assert Settings.load(environ={}).log_format == ""
    assert Settings.load(environ={"EVENTFLOW_LOG_FORMAT": "text"}).log_format == "text"
    with pytest.raises(ValueError, match="EVENTFLOW_LOG_FORMAT"):
        Settings.load(environ={"EVENTFLOW_LOG_FORMAT": "xml"})
