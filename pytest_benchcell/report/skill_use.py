"""The report's view of skill use: per arm, the share of its scored trials that used its skill, and the
note beside a declared comparison whose skill arm rarely used it (the comparison then says little
about the skill itself). The statistics are the comparison's own; this only says what they are over."""

from __future__ import annotations

from collections.abc import Sequence

from .model import CellSummary, Report, SkillShare, plural

# Below this share of its trials the skill was "rarely used": most of the arm's trials ran without it.
RARELY_USED = 0.5


def arm_shares(cells: Sequence[CellSummary]) -> dict[str, SkillShare]:
    """Per arm (in the cells' order), its cells' skill records added up."""
    totals: dict[str, SkillShare] = {}
    for cell in cells:
        if cell.skill is None:
            continue
        seen = totals.get(cell.arm)
        trials = cell.skill.trials + (seen.trials if seen else 0)
        used = cell.skill.used + (seen.used if seen else 0)
        totals[cell.arm] = SkillShare(cell.skill.delivery, trials, used, used / trials)
    return totals


def usage_text(share: SkillShare) -> str:
    """"loaded in 2 of 6 trials (33%)", or "embedded in the prompt (every trial)"."""
    if share.delivery == "embed":
        return f"embedded in the prompt ({plural(share.trials, 'trial')})"
    return f"loaded in {share.used} of {plural(share.trials, 'trial')} ({100 * (share.share or 0):.0f}%)"


def rarely_used_notes(report: Report) -> list[str]:
    """One sentence per declared pair with an arm whose skill was used in fewer than RARELY_USED of its trials."""
    shares = arm_shares([*report.cells, *report.bonus.cells])
    pairs = dict.fromkeys((pair.arm_a, pair.arm_b) for comparison in report.comparisons for pair in comparison.pairs)
    notes = []
    for arm_a, arm_b in pairs:
        for arm in (arm_a, arm_b):
            share = shares.get(arm)
            if share is not None and share.share is not None and share.share < RARELY_USED:
                notes.append(
                    f"{arm_a} vs {arm_b}: {arm}'s agent rarely used its skill ({usage_text(share)}), so the "
                    f"comparison says little about the skill itself; see Skill use."
                )
    return notes
