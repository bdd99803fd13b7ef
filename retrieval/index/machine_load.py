"""Whether the machine was quiet while something was timed: its load average and the CPU time other
processes took meanwhile.

A speed measured while another process shares the cores measures the sharing, not the code: on a
2-core machine at load 18 the encoder's calibration saw 4–17 passages a second per candidate and
chose fp32 in one run and bf16 in the next. So a timing is trusted only where the machine was
quiet around it (``Reading``, ``others_between``, ``busy_between``):

* before it starts, the 1-minute load average is at most the number of cores (more runnable threads
  than cores: some wait, the timed code among them);
* other processes took at most ``OTHERS_SHARE`` of the machine's cores (at least
  ``OTHERS_FLOOR`` cores) between two readings: the CPU time every process used (``/proc/stat``'s
  busy jiffies, steal included: another virtual machine on the same cores) less this process's own
  (``os.times``, every thread of it). Another process using 10% of the cores slows code that runs
  on every core by about as much, the size of the margin bf16 must win by (``cpu_choice.BF16_GAIN``),
  so a choice made beside more could be that process's.

Where ``/proc/stat`` is absent (not Linux) other processes' CPU time is unknown and the load average
(where the platform has one) decides alone. The threads of this process are not told apart: a
background build of the same process is counted as this process's own work.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

OTHERS_SHARE = 0.10  # other processes may take this share of the machine's cores while a timing runs …
OTHERS_FLOOR = 0.20  # … or this many cores, whichever is more (daemons on a small machine)
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # /proc/stat's cpu line: user nice system [idle iowait] irq softirq steal


@dataclass(frozen=True)
class Reading:
    """The machine at one moment."""

    at: float  # ``time.monotonic()`` seconds
    load: float | None  # the 1-minute load average; None where the platform has none
    cores: int  # logical CPUs this process may run on
    busy_s: float | None  # CPU seconds every process has used since boot; None where unknown
    own_s: float  # CPU seconds this process (every thread) has used


def _busy_seconds(stat: str | None = None) -> float | None:
    """Seconds of CPU time all processes have used, from ``/proc/stat``'s first line (``stat`` in
    tests); None where it cannot be read."""
    try:
        text = stat if stat is not None else Path("/proc/stat").read_text()[:4096]
        fields = text.split("\n", 1)[0].split()
        if not fields or fields[0] != "cpu":
            return None
        ticks = [int(x) for x in fields[1:9]]
        return sum(ticks[i] for i in _BUSY_FIELDS if i < len(ticks)) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None


def cores() -> int:
    """Logical CPUs this process may run on (its affinity where the platform says)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def read() -> Reading:
    """The machine now."""
    try:
        load: float | None = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = None
    own = os.times()
    return Reading(time.monotonic(), load, cores(), _busy_seconds(), own.user + own.system)


def others_between(first: Reading, last: Reading) -> float | None:
    """Cores other processes used on average between two readings; None where unknown."""
    wall = last.at - first.at
    if first.busy_s is None or last.busy_s is None or wall <= 0:
        return None
    return max(0.0, ((last.busy_s - first.busy_s) - (last.own_s - first.own_s)) / wall)


def busy_at(reading: Reading) -> str | None:
    """Why the machine is busy at ``reading`` (its load above its cores), as data for a sentence: e.g.
    "load 5.2 on 2 cores"; None where it is not (or the platform gives no load)."""
    if reading.load is not None and reading.load > reading.cores:
        return f"load {reading.load:.1f} on {reading.cores} cores"
    return None


def busy_between(first: Reading, last: Reading) -> str | None:
    """Why the machine was busy between two readings: other processes above ``OTHERS_SHARE`` of its
    cores (at least ``OTHERS_FLOOR``) in between; where that is unknown, its load above its cores at
    either reading. None where it was quiet. (The load average counts this process's own threads too,
    so it is not the measure where other processes' CPU time is known.)"""
    others = others_between(first, last)
    if others is None:
        return busy_at(last) or busy_at(first)
    if others > max(OTHERS_FLOOR, OTHERS_SHARE * last.cores):
        return f"other processes used {others:.1f} of {last.cores} cores"
    return None
