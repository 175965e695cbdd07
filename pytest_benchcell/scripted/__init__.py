"""A scripted fake of the Anthropic Messages API, served on 127.0.0.1.

Why it exists
-------------
A bench that drives a coding agent through claude-agent-sdk is itself software that needs tests,
and running those tests against a real model costs tokens, is slow and is not reproducible.
:class:`ScriptedModel` stands in for the model: it is a tiny stdlib HTTP server that answers
``POST /v1/messages`` (the Claude Code CLI calls ``/v1/messages?beta=true`` with ``stream: true``)
by playing a fixed script of steps, one step per request. Point the CLI at it with
``ANTHROPIC_BASE_URL=<model.base_url>`` and the *real* CLI runs the *real* tools and hooks
(Bash really executes, PreToolUse hooks really fire, ResultMessage carries real accounting), for
free and deterministically. So a whole trial (provision -> agent -> audit -> score -> record) can
be tested end to end offline.

Script steps
------------
- :class:`ToolUse` -- the model calls a tool (optionally after some text); stop_reason ``tool_use``.
- :class:`Answer` -- the model ends its turn with final text; stop_reason ``end_turn``.
- :func:`load_skill` -- the model loads a skill through Claude Code's Skill tool (a ``ToolUse``).
- :class:`Delay` -- sleep, then play another step (to exercise wall-clock bounds).
- :class:`ApiError` -- answer with an HTTP error status and an Anthropic-style JSON error body,
  optionally with ``retry-after`` or ``x-should-retry: false``.
- :class:`BrokenStream` -- answer 200 and start streaming a reply, then break the stream: the
  connection cut mid-message, an SSE event that is not JSON, or an ``event: error`` in the stream.
- :class:`Stall` -- stream a reply's start and first delta, then send no byte for a while.
- :class:`NoUsage` -- stream a reply with no usage fields at all (a gateway that omits them).
- :class:`Repeat` -- play a step forever (to exercise turn caps and outages); must be the last step.

The faults are those a real Messages API or a gateway in front of it shows; what the Claude Code CLI
does with each (retry, give up, wait) is what the end-to-end tests of the harness pin
(tests/test_api_faults_e2e.py).

Each request to a path starting with ``/v1/messages`` consumes the next step (a Repeat is never
consumed). Once the script is exhausted every request is answered with
``Answer("(script exhausted)")``, so a mis-scripted test ends instead of hanging.

Usage model (deterministic, scales with the real request)
---------------------------------------------------------
Token accounting must behave like a real model's for a bench to compare arms: an arm whose tool
definitions or tool outputs are bigger must cost more, and prompt caching must show up. So usage
is computed from the request actually received, not scripted:

1. The prompt text is the concatenation of ``json.dumps(part, sort_keys=True)`` of the system
   prompt, the tools array and then each message in order. ``cache_control`` markers are removed
   first: the CLI moves them from message to message, and the real API does not count them as
   content either (left in, they would break every cached prefix).
2. Tokens are characters / 4, rounded down.
3. The server remembers every prompt it has answered successfully. The longest common prefix (in
   characters) between this prompt and any earlier one is a cache READ. The characters after that
   prefix are new: those inside the final message are fresh input, those before it are a cache
   WRITE (on the first request: everything but the final message is a cache write).
   Fresh input is at least 1 token.
4. Output tokens are len(JSON of the emitted content blocks) / 4, at least 1.

message_start carries ``input_tokens`` (fresh), ``cache_creation_input_tokens`` and
``cache_read_input_tokens``; message_delta carries ``output_tokens`` and repeats the input fields,
as the real API does. The same sequence of requests always yields the same usage; tool-use and
message ids come from per-server counters (fixed width) for the same reason. Failed requests
(ApiError, BrokenStream) report no usage and are not remembered for caching; a NoUsage reply is
remembered for caching but reports nothing, so it is missing from :attr:`ScriptedModel.usages`.

One module a responsibility: `steps` (the script's steps and its check), `usage` (token accounting
from the request), `wire` (error bodies, messages, SSE events), `server` (`ScriptedModel`). Every
public name is re-exported here.

This package is pure stdlib: it must not import pytest or claude_agent_sdk.
"""

# The names outside __all__ are re-exported (as X) for the callers of the module this package was.
from .server import DEFAULT_MODEL_NAME as DEFAULT_MODEL_NAME
from .server import EXHAUSTED_TEXT as EXHAUSTED_TEXT
from .server import MESSAGES_PATH as MESSAGES_PATH
from .server import ScriptedModel
from .steps import STREAM_FAULTS as STREAM_FAULTS
from .steps import Answer, ApiError, BrokenStream, Delay, NoUsage, Repeat, Stall, Step, ToolUse, load_skill
from .steps import Reply as Reply
from .usage import CHARS_PER_TOKEN as CHARS_PER_TOKEN
from .usage import DEFERRED_TOOLS as DEFERRED_TOOLS
from .usage import Usage, offered_tools, prompt_text
from .usage import _common_prefix_length as _common_prefix_length
from .wire import FIRST_DELTA_EVENTS as FIRST_DELTA_EVENTS
from .wire import SSE_TYPE as SSE_TYPE
from .wire import error_body as error_body
from .wire import error_type_for as error_type_for

__all__ = [
    "Answer",
    "ApiError",
    "BrokenStream",
    "Delay",
    "NoUsage",
    "Repeat",
    "ScriptedModel",
    "Stall",
    "Step",
    "ToolUse",
    "load_skill",
    "Usage",
    "offered_tools",
    "prompt_text",
]
