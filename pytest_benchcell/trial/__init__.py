"""One trial, start to finish: provision -> run the agent -> audit -> score -> teardown -> record.

Knows nothing of pytest: it receives the bench's hooks as a pluggy hook relay (anything with the
`benchcell_*` attributes) and the function that runs the agent, so tests can hand it either.
Every way a trial can end produces exactly one complete sample, appended once:
- scored (pass, incorrect, confused, hung): the agent's doing;
- invalid: a tool outside the arm actually ran (audit), never scored;
- error: the harness failed (provisioning, a hook, the model API, the CLI), not the agent's fault.
  A trial the model API ended (api_faults.classify: the CLI gave up on it, was still retrying it at
  the backstop, it stalled, it refused the credentials) is an error naming the status, the error
  category and the attempts, and carries `api_error`; an error sample keeps no final answer.
Anything else that ends a trial early is recorded too, after teardown, and then passed on: an
interrupt (Ctrl-C, SIGTERM, a pytest-timeout, pytest.exit) as `error: interrupted: ...`, a bug of
the harness itself as `error: internal: <exception type>: ...` (re-raised so its traceback shows).

One module a responsibility, lower ones never importing higher ones: `spec` (what a trial is given,
its errors, a hook's call) <- `provisioning` (folders, environment, teardown), `rules` (the arm's
rules, the guard), `recording` (the sample started and appended), `measurements` (what the run
measured) <- `verdict` (the scoring) <- `walk` (`run_trial`). Every public name is re-exported here.
"""

from ..confinement import exec_audit_state as exec_audit_state  # imported from here by benchmarks/
from .measurements import TOOL_OUTPUT_LIMIT
from .provisioning import READY_POLL_S, provisioned, trial_folders, trial_values
from .rules import arm_rules, decide_with
from .spec import AgentRunner, HarnessError, RecordedCallback, StoreUnavailable, TaskUnusable, TrialSpec
from .verdict import STATE_LIMIT, apply_verdict, bounded_state, check_changes, differences_for, not_against_the_arm
from ..cli_environment import SCRIPTED_API_KEY
from .walk import run_trial

__all__ = [
    "AgentRunner",
    "HarnessError",
    "READY_POLL_S",
    "RecordedCallback",
    "SCRIPTED_API_KEY",
    "STATE_LIMIT",
    "StoreUnavailable",
    "TOOL_OUTPUT_LIMIT",
    "TaskUnusable",
    "TrialSpec",
    "apply_verdict",
    "arm_rules",
    "bounded_state",
    "check_changes",
    "decide_with",
    "differences_for",
    "not_against_the_arm",
    "provisioned",
    "run_trial",
    "trial_folders",
    "trial_values",
]
