"""Figures and their report: one row per figure, printed as it is measured and written as Markdown."""

from __future__ import annotations

import math
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.lib.timing import Sample

START = "<!-- bench:results:start -->"
END = "<!-- bench:results:end -->"


@dataclass
class Figure:
    """One measured figure: memora_pg's time, the raw baseline's, their ratio, and what else was checked.

    ``ours``/``raw`` are seconds per call. Throughput figures set ``rate`` (per second) instead and
    put the comparison in ``ratio``.
    """

    section: str
    name: str
    scale: str
    mode: str = ""
    ours: Sample | None = None
    raw: Sample | None = None
    ratio: float | None = None
    rate: float | None = None
    notes: list[str] = field(default_factory=list)
    target: str = ""
    met: bool | None = None
    # The package's own time per call (seconds): the p50 less the server's time on the same statements.
    client_share: float | None = None
    # The same for the raw side (its p50 less the server's time on its statements), where measured:
    # what the round trip and asyncpg's decoding of the rows cost with no package at all.
    raw_client_share: float | None = None

    def __post_init__(self) -> None:
        if self.ratio is None and self.ours is not None and self.raw is not None and self.raw.median > 0:
            self.ratio = self.ours.median / self.raw.median

    def line(self) -> str:
        parts = [f"[{self.scale} {self.mode or '-'}] {self.section}: {self.name}"]
        if self.ours is not None:
            parts.append(f"median {ms(self.ours.median)} p95 {ms(self.ours.p95)}")
        if self.raw is not None:
            parts.append(f"raw median {ms(self.raw.median)} p95 {ms(self.raw.p95)}")
        if self.rate is not None:
            parts.append(f"{self.rate:,.0f}/s")
        if self.ratio is not None:
            parts.append(f"ratio {self.ratio:.2f}")
        if self.client_share is not None:
            parts.append(f"client share {share(self)}")
        if self.notes:
            parts.append("; ".join(self.notes))
        if self.target:
            parts.append(f"target {self.target}: {verdict(self.met)}")
        return " | ".join(parts)


def ms(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "—"
    value = seconds * 1000
    return f"{value:.2f} ms" if value < 100 else f"{value:,.0f} ms"


def share(figure: Figure) -> str:
    """The client share, and the raw side's beside it when measured."""
    if figure.raw_client_share is None:
        return ms(figure.client_share)
    return f"{ms(figure.client_share)} (raw {ms(figure.raw_client_share)})"


def verdict(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "—"}[met]


def _cell(sample: Sample | None, pick: str) -> str:
    if sample is None:
        return "—"
    return ms(sample.median if pick == "median" else sample.p95)


def markdown(figures: Sequence[Figure], *, header: Sequence[str]) -> str:
    out = [START, "", *header, ""]
    sections: dict[str, list[Figure]] = {}
    for figure in figures:
        sections.setdefault(figure.section, []).append(figure)
    for section, rows in sections.items():
        out += [f"### {section}", ""]
        out.append(
            "| figure | scale | mode | median | p95 | raw median | raw p95 | rate | ratio | client share | checked "
            "| target |"
        )
        out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for f in rows:
            rate = f"{f.rate:,.0f}/s" if f.rate is not None else "—"
            ratio = f"{f.ratio:.2f}×" if f.ratio is not None else "—"
            target = f"{f.target}: {verdict(f.met)}" if f.target else "—"
            out.append(
                f"| {f.name} | {f.scale} | {f.mode or '—'} | {_cell(f.ours, 'median')} | {_cell(f.ours, 'p95')} "
                f"| {_cell(f.raw, 'median')} | {_cell(f.raw, 'p95')} | {rate} | {ratio} | {share(f)} "
                f"| {'; '.join(f.notes) or '—'} "
                f"| {target} |"
            )
        out.append("")
    out.append(END)
    return "\n".join(out)


def write(path: Path, block: str, *, title: str) -> None:
    """Replace the results block of ``path`` (hand-written text around it stays), or start the file."""
    if path.exists():
        text = path.read_text()
        if START in text and END in text:
            before, rest = text.split(START, 1)
            _, after = rest.split(END, 1)
            path.write_text(before + block + after)
            return
        path.write_text(text.rstrip() + "\n\n" + block + "\n")
        return
    path.write_text(f"# {title}\n\n{block}\n")


def machine() -> str:
    import os

    memory = ""
    try:
        with open("/proc/meminfo") as info:
            kib = int(info.readline().split()[1])
            memory = f", {kib / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores{memory}, {platform.system()} {platform.release()}"
