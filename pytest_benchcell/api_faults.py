"""What the model API did during a trial, and whether the trial ended by its doing.

Pure values: agent.py feeds an :class:`ApiLog` from the Claude Code CLI's message stream (this
module imports no SDK), and :func:`classify` reads it once the run is over. The API's own signals,
as the CLI reports them (measured with CLI 2.1.332):

- every failed request the CLI will retry is reported as a system message ``api_retry`` with the
  attempt number (1, 2, ... per request), the HTTP status (``null`` when no status came: a
  connection cut), the CLI's error category (``server_error``, ``rate_limit``, ``overloaded``,
  ``authentication_failed``, ``unknown``) and the wait before the next attempt (``retry_delay_ms``:
  0.6, 1.2, 2.2, 4.0 s ... and about three minutes in all for a request that keeps failing; a
  ``retry-after`` header sets it);
- when the CLI gives up (its retries spent, or ``x-should-retry: false``), a synthetic assistant
  message carries the error category and the result is ``is_error`` with ``terminal_reason``
  ``api_error`` and ``api_error_status``;
- a model request begins with a ``status: requesting`` system message (once per request, not per
  retry); each streamed reply arrives as raw stream events from ``message_start`` to
  ``message_stop``. After an interrupt the CLI closes a reply it was streaming with
  ``content_block_stop``, ``message_delta`` and ``message_stop`` events of its own making: those
  are no sign of the API, and the reply they close was cut off.

What the harness concludes:

- a trial ends *by the API* when the CLI gave up on a failing request, when it was still retrying
  one as the trial ended (the backstop), when the API sent no byte for ``api_stall_ms`` while a
  request was open (a stall: the trial is ended at once, not at the backstop), when the backstop
  fired while an open request had sent no byte for ``backstop_silence_ms`` (a quarter of
  ``api_stall_ms``, at most 15 s: a stall the watch had not yet reached, where a model that streams
  slowly stays the agent's hang), or when requests were
  refused for credentials :data:`CREDENTIAL_ATTEMPTS` times in a row (the CLI retries a 401 for about
  three minutes; no retry fixes a wrong key, so the trial is ended at once). Such a trial is an
  ``error`` naming the status, the error category and the attempts: never hung, confused or incorrect;
- the API's retry waits are the API's time, not the agent's (``api_wait_ms``);
- a reply counts as a turn when it was received in full, and a reply without usage fields makes the
  trial's usage unknown: a gateway that drops usage must not make an arm look free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_API_STALL_MS = 60_000
MIN_API_STALL_MS = 1_000
# When the backstop fires while a request has been silent this long, the API stalled, not the model:
# a quarter of api_stall_ms, at most 15 s (the bound at the default 60 s). A live reply sends its next
# event within a second or two while the model writes (deltas, thinking deltas, the API's pings), and
# its first byte (message_start) comes before any writing; so 15 s without a byte is an API or gateway
# that stopped, never a model that writes slowly. A quarter keeps the bound well under a lowered
# api_stall_ms, where the stall watch itself takes over.
BACKSTOP_SILENCE_CAP_MS = 15_000
BACKSTOP_SILENCE_SHARE = 4  # the bound is api_stall_ms / this, capped
DEFAULT_STOP_AFTER_API_FAILURES = 3
# The CLI retries a request refused for credentials (401 without `x-should-retry: false`, 403) for
# about three minutes, as it does a 500; after this many refusals in a row the harness ends the trial.
CREDENTIAL_ATTEMPTS = 3
CREDENTIAL_STATUSES = (401, 403)
CREDENTIAL_ERROR = "authentication_failed"

KIND_CREDENTIALS = "credentials"  # the API refused the credentials: no trial of the sitting can succeed
KIND_FAILING = "failing"  # the API kept failing (5xx, 429, 529, cut connections) until the trial ended
KIND_STALLED = "stalled"  # the API sent no byte for api_stall_ms while a request was open
API_FAULT_KINDS = (KIND_CREDENTIALS, KIND_FAILING, KIND_STALLED)

CREDENTIAL_FIX = (
    "check the credentials the CLI is given: ANTHROPIC_API_KEY (API users), CLAUDE_CODE_OAUTH_TOKEN from "
    "`claude setup-token` (subscription users), or ANTHROPIC_AUTH_TOKEN with ANTHROPIC_BASE_URL (a gateway)"
)


def error_category(status: int | None) -> str:
    """The CLI's error category for an HTTP status (its own mapping, for a status it did not name)."""
    if status == 529:
        return "overloaded"
    if status == 429:
        return "rate_limit"
    if status in CREDENTIAL_STATUSES:
        return CREDENTIAL_ERROR
    if status is not None and status >= 408:
        return "server_error"
    return "unknown"


@dataclass(frozen=True)
class Retry:
    """One api_retry message: the request's attempt that failed and the wait before the next."""

    at_ms: int  # since the conversation began
    attempt: int
    status: int | None
    error: str
    delay_ms: int

    @property
    def next_attempt_ms(self) -> int:
        return self.at_ms + self.delay_ms


@dataclass
class ApiLog:
    """The API's signals during one run, fed in the order the CLI sent them (times in ms since the
    conversation began). Also the stall watch: :meth:`stall_due_ms` is when silence becomes a stall."""

    stall_ms: int = DEFAULT_API_STALL_MS
    retries: list[Retry] = field(default_factory=list)  # every retry of the run (their waits)
    pending: list[Retry] = field(default_factory=list)  # the retries of the request still failing
    requests: int = 0  # model requests the CLI announced
    open_since_ms: int | None = None  # a request is open (announced or streaming) since; None: none is
    last_sign_ms: int = 0  # the API's last sign (a stream event, a retry's end) while a request was open
    streaming: str | None = None  # the id of the reply being streamed (message_start seen, no message_stop)
    replies: list[str] = field(default_factory=list)  # ids of the replies the agent received, in order
    cut: set[str] = field(default_factory=set)  # replies an interrupt cut off before they were complete
    unreported: set[str] = field(default_factory=set)  # replies that came without any usage field
    gave_up: str | None = None  # the CLI's error category when it stopped retrying (synthetic message)
    interrupted_ms: int | None = None
    stalled_ms: int | None = None  # when the stall watch ended the run
    refused_ms: int | None = None  # when repeated credential refusals ended the run

    # -- feeding ---------------------------------------------------------------------------------
    def request_began(self, at_ms: int) -> None:
        if self.interrupted_ms is not None:
            return
        self.requests += 1
        self.open_since_ms = self.last_sign_ms = at_ms

    def stream_event(self, at_ms: int, kind: str, message_id: str | None = None) -> None:
        """A raw event of a streamed reply. After an interrupt the CLI makes up the closing events."""
        if self.interrupted_ms is not None:
            return
        self.last_sign_ms = at_ms
        if self.open_since_ms is None:
            self.open_since_ms = at_ms  # a request the CLI did not announce
        if kind == "message_start":
            self.streaming = message_id
            self.pending.clear()
        elif kind == "message_stop":
            self.streaming = None
            self.open_since_ms = None  # answered: the time until the next request is the agent's

    def retry(self, at_ms: int, attempt: int, status: int | None, error: str, delay_ms: int) -> None:
        if self.interrupted_ms is not None:
            return
        retry = Retry(at_ms, attempt, status, error, max(0, delay_ms))
        self.retries.append(retry)
        self.pending.append(retry)
        self.streaming = None  # a reply broken off mid-stream is retried whole
        self.open_since_ms = at_ms
        # The retry's wait is the CLI's, not a silence of the API: the watch restarts after it.
        self.last_sign_ms = at_ms + max(0, delay_ms)

    def reply(self, message_id: str, *, usage_reported: bool) -> None:
        """An assistant message of the model (one reply may arrive as several, with one id)."""
        if message_id in self.replies:
            return
        if self.interrupted_ms is not None and message_id != self.streaming:
            return  # nothing new arrives after an interrupt but the reply it cut
        self.replies.append(message_id)
        if not usage_reported:
            self.unreported.add(message_id)
        self.pending.clear()

    def failed_for_good(self, error: str) -> None:
        """The CLI stopped retrying and reported the failure as a synthetic assistant message."""
        self.gave_up = error or "unknown"

    def interrupted(self, at_ms: int) -> None:
        """The harness interrupted the CLI (backstop, stall, refused credentials)."""
        if self.interrupted_ms is None:
            self.interrupted_ms = at_ms
            if self.streaming is not None:
                self.cut.add(self.streaming)

    # -- the watch -------------------------------------------------------------------------------
    def stall_due_ms(self) -> int | None:
        """When the silence of an open request becomes a stall; None while no request is open."""
        if self.open_since_ms is None or self.interrupted_ms is not None:
            return None
        return self.last_sign_ms + self.stall_ms

    @property
    def backstop_silence_ms(self) -> int:
        """How long an open request must have been silent when the backstop fires for the trial to be
        the API's stall rather than the agent's hang (BACKSTOP_SILENCE_CAP_MS says why)."""
        return min(self.stall_ms // BACKSTOP_SILENCE_SHARE, BACKSTOP_SILENCE_CAP_MS)

    def silent_when_interrupted_ms(self) -> int | None:
        """How long the open request had sent no byte when the harness interrupted the run; None when
        no request was open then (the agent's own time: a tool running, or no interrupt)."""
        if self.interrupted_ms is None or self.open_since_ms is None:
            return None
        return max(0, self.interrupted_ms - self.last_sign_ms)

    def credentials_refused(self) -> bool:
        """Whether the current request was refused for credentials CREDENTIAL_ATTEMPTS times in a row."""
        refused = 0
        for retry in reversed(self.pending):
            if not _refused(retry.status, retry.error):
                break
            refused += 1
        return refused >= CREDENTIAL_ATTEMPTS

    # -- reading ---------------------------------------------------------------------------------
    @property
    def failing(self) -> bool:
        """Whether the API's last word was a failure: no reply began since the last failed attempt."""
        return bool(self.pending) or self.gave_up is not None

    @property
    def completed_replies(self) -> list[str]:
        """The replies received in full: the trial's turns."""
        return [reply for reply in self.replies if reply not in self.cut]

    @property
    def usage_unreported(self) -> int:
        """Replies received in full whose usage the API did not report."""
        return sum(1 for reply in self.completed_replies if reply in self.unreported)

    def wait_ms(self, end_ms: int) -> int:
        """The CLI's waits between attempts, each as long as it lasted before the run ended."""
        return sum(max(0, min(retry.next_attempt_ms, end_ms) - retry.at_ms) for retry in self.retries)

    def attempts(self, end_ms: int, *, gave_up: bool = False) -> int:
        """Attempts made of the last failing request: its last retry's attempt, plus the attempt
        after it if that began (the CLI's final, failed one when it gave up)."""
        if not self.pending:
            return 1
        last = self.pending[-1]
        began_again = gave_up or end_ms >= last.next_attempt_ms
        return last.attempt + (1 if began_again else 0)


@dataclass(frozen=True)
class ApiFault:
    """The API ended the trial: what it said, how often it was asked."""

    kind: str  # one of API_FAULT_KINDS
    status: int | None  # the HTTP status of the last failed attempt (None: no status, e.g. a cut connection)
    error: str  # the CLI's error category, or "stall"
    attempts: int
    detail: str  # how it ended, in words

    @property
    def reason(self) -> str:
        status = f"HTTP {self.status} " if self.status is not None else ""
        tries = f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}"
        if self.kind == KIND_STALLED:
            return f"model API stalled: {self.detail} ({tries}); not the agent's doing"
        if self.kind == KIND_CREDENTIALS:
            return f"model API refused the credentials: {status}{self.error} on {tries}, {self.detail}"
        return f"model API error: {status}{self.error} on {tries}, {self.detail}; not the agent's doing"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "status": self.status, "error": self.error, "attempts": self.attempts}


@dataclass(frozen=True)
class RunEnd:
    """How the CLI's run ended, as its result (if any) and the harness saw it."""

    end_ms: int  # since the conversation began
    backstop: bool = False  # the wall-clock backstop interrupted it
    is_error: bool = False
    terminal_reason: str | None = None
    api_error_status: int | None = None


def classify(log: ApiLog, end: RunEnd) -> ApiFault | None:
    """The API fault that ended the run, or None when the run's end is the agent's (or the harness's)."""
    last = log.pending[-1] if log.pending else None
    if log.stalled_ms is not None:
        stalled_from = log.stalled_ms - log.stall_ms
        where = "mid-reply" if log.streaming is not None else "before the reply began"
        detail = f"no byte for {log.stall_ms} ms {where} ([bench] api_stall_ms), from {stalled_from / 1000:.1f} s into the conversation"
        return ApiFault(KIND_STALLED, None, "stall", log.attempts(end.end_ms), detail)
    if log.refused_ms is not None:
        assert last is not None  # refusals are retries
        return ApiFault(KIND_CREDENTIALS, last.status, last.error, log.attempts(end.end_ms), "the trial was ended at once")
    gave_up = end.is_error and (end.terminal_reason == "api_error" or end.api_error_status is not None or log.gave_up is not None)
    if gave_up:
        status = end.api_error_status if end.api_error_status is not None else (last.status if last else None)
        # The retry messages name the API's own category (overloaded); the CLI's final message a coarser one.
        if last is not None and last.status == status:
            error = last.error
        else:
            error = log.gave_up if log.gave_up and log.gave_up != "unknown" else error_category(status)
        kind = KIND_CREDENTIALS if _refused(status, error) else KIND_FAILING
        return ApiFault(kind, status, error, log.attempts(end.end_ms, gave_up=True), "the CLI gave up")
    if end.backstop and last is not None:
        kind = KIND_CREDENTIALS if _refused(last.status, last.error) else KIND_FAILING
        return ApiFault(kind, last.status, last.error, log.attempts(end.end_ms), "still failing when the backstop was reached")
    silent = log.silent_when_interrupted_ms() if end.backstop else None
    if silent is not None and silent >= log.backstop_silence_ms:
        where = "mid-reply" if log.streaming is not None else "before the reply began"
        detail = (
            f"no byte for {silent} ms {where} when the wall-clock backstop was reached (a stall from "
            f"{log.backstop_silence_ms} ms at the backstop: a quarter of [bench] api_stall_ms, at most "
            f"{BACKSTOP_SILENCE_CAP_MS // 1000} s), from {log.last_sign_ms / 1000:.1f} s into the conversation"
        )
        return ApiFault(KIND_STALLED, None, "stall", log.attempts(end.end_ms), detail)
    return None


def _refused(status: int | None, error: str | None) -> bool:
    return status in CREDENTIAL_STATUSES or error == CREDENTIAL_ERROR


def fault_from_sample(sample: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The stored `api_error` of a sample, when the API ended its trial."""
    fault = sample.get("api_error")
    return fault if isinstance(fault, dict) and fault.get("kind") in API_FAULT_KINDS else None
