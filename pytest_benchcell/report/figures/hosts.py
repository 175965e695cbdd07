"""Where trials ran: the samples every figure uses, grouped by the machine (provenance.host) and arm."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ... import statistics as stats
from ..model import HostRow
from ..reading import UNKNOWN_HOST, PlaceTally

# (arm, host, gateway, the trials of one cell's reported group that ran there)
Place = tuple[str, str, str, PlaceTally]


def where_trials_ran(places: Iterable[Place], arms: Sequence[str]) -> list[HostRow]:
    """One row per (host, arm) with trials, hosts by name ("unknown" last), arms in report order.
    Empty when every trial ran on one host: a table of one machine tells nothing the headline does not."""
    merged: dict[tuple[str, str], tuple[PlaceTally, set[str]]] = {}
    for arm, host, gateway, tally in places:
        total, gateways = merged.setdefault((host, arm), (PlaceTally(), set()))
        total.samples += tally.samples
        total.scored += tally.scored
        total.passes += tally.passes
        total.cost_equivalent += tally.cost_equivalent
        total.duration_s += tally.duration_s
        if gateway:
            gateways.add(gateway)
    if len({host for host, _ in merged}) < 2:
        return []
    order = {arm: position for position, arm in enumerate(arms)}
    return [
        HostRow(
            host=host, arm=arm, gateways=sorted(gateways, key=_gateway_order), samples=total.samples,
            scored=total.scored, passed=total.passes,
            success_rate=total.passes / total.scored if total.scored else None,
            cost_equivalent_median=stats.median(total.cost_equivalent) if total.cost_equivalent else None,
            duration_s_median=stats.median(total.duration_s) if total.duration_s else None,
        )  # fmt: skip
        for (host, arm), (total, gateways) in sorted(
            merged.items(), key=lambda item: (item[0][0] == UNKNOWN_HOST, item[0][0], order.get(item[0][1], len(order)), item[0][1])
        )
    ]


def _gateway_order(gateway: str) -> tuple[int, str]:
    """gw2 before gw10."""
    number = gateway[2:] if gateway.startswith("gw") else ""
    return (int(number), gateway) if number.isdigit() else (-1, gateway)
