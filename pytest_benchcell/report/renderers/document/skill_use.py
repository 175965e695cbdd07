"""The Skill use section: how often the arms with a skill used it. Per arm in every format, per cell
too where the format has room (Markdown, HTML); absent when no arm has a skill."""

from __future__ import annotations

from ...model import Report
from ...skill_use import RARELY_USED, arm_shares, rarely_used_notes
from .blocks import Block, Heading, Table, Text, _percent


def _skill_use_blocks(report: Report, *, detail: bool) -> list[Block]:
    cells = [*report.cells, *report.bonus.cells]
    shares = arm_shares(cells)
    if not shares:
        return []
    blocks: list[Block] = [
        Heading("Skill use"),
        Text(
            "A skill embedded in the prompt is in every trial; one delivered natively (skill_delivery = \"native\") "
            "is used in the trials whose agent loaded it (the Skill tool, a read of its files, a command that prints "
            f"or runs them). Scored trials only. Below {_percent(RARELY_USED)} the skill was rarely used, and a "
            "comparison of its arm says little about the skill itself."
        ),
        Table(
            ["arm", "delivery", "trials", "used", "share", "cells used in no trial"],
            [
                [arm, share.delivery, str(share.trials), str(share.used), _percent(share.share),
                 str(sum(1 for c in cells if c.arm == arm and c.skill is not None and c.skill.used == 0))]
                for arm, share in shares.items()
            ],  # fmt: skip
            left=2,
        ),
    ]
    blocks += [Text(note) for note in rarely_used_notes(report)]
    if detail:
        rows = [
            [cell.arm, cell.task, f"{cell.skill.used}/{cell.skill.trials}", _percent(cell.skill.share)]
            for cell in cells
            if cell.skill is not None and cell.skill.delivery != "embed"
        ]
        if rows:
            blocks += [Text("Per cell, the natively delivered skills:"), Table(["arm", "task", "used", "share"], rows, left=2)]
    return blocks

